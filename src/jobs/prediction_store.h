// PredictionStore: a table of predictions a batch job wrote (prediction_sink.h's
// layout: key, model_name, model_version, predicted_at, one column per
// output), read by key at request time and written back after an online
// answer: hybrid (precomputed + online) serving.
//
// A store that lost its database answers UNAVAILABLE and reconnects on a
// later call (at most once per `reconnect_interval`), so a database that
// comes back is used again without a restart.
//
// Thread-safety: all methods are thread-safe (one connection, serialized).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "jobs/cell.h"

namespace inferd::jobs {

struct StoredPrediction {
  std::string model_name;
  std::string model_version;
  double predicted_at = 0;   // Unix seconds
  std::vector<Cell> values;  // one per value column asked for (NULL when the column is NULL)
};

class PredictionStore {
 public:
  virtual ~PredictionStore() = default;
  // The row for `key`; nullopt when there is none.
  virtual Result<std::optional<StoredPrediction>> Lookup(const std::string& key) = 0;
  // Inserts or replaces the row for `key` (predicted_at = now).
  virtual Status Write(const std::string& key, const std::string& model, const std::string& version,
                       const std::vector<Cell>& values) = 0;
};

struct StoreTable {
  std::string table;
  std::string key_column;
  std::vector<std::string> value_columns;
  std::chrono::milliseconds reconnect_interval{1000};
};

}  // namespace inferd::jobs
