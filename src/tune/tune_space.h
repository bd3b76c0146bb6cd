// What `inferd tune` varies for one model: the serving settings of a
// candidate (Candidate), the model's own settings they start from
// (ModelFacts, read from its config), the search space over them
// (TuneSpace: dimensions in the order the search visits them, the start
// point, which points are worth measuring) and the config edit that turns a
// candidate into a config.pbtxt. Pure; tune_space_test.cc.
//
// Thread-safety: values; no shared state.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "core/model_spec.h"
#include "repository/config_edit.h"
#include "tune/hill_climb.h"

namespace inferd::tune {

enum class BatchingMode { kOff, kFixed, kAdaptive };

struct Candidate {
  std::string protocol = "v2-json";  // v2-json | v2-binary | grpc (client side: the server is the same)
  int instances = 1;
  int threads = 1;
  BatchingMode batching = BatchingMode::kOff;
  uint64_t delay_us = 0;  // kFixed
  int max_batch_size = 0;
  bool int8 = false;

  // The server's settings only (what needs a restart), canonical: a
  // setting that does not act (max batch size without batching) is left out.
  std::string ServerKey() const;
  std::string Key() const { return ServerKey() + ", " + protocol; }
};

std::string BatchingName(BatchingMode mode, uint64_t delay_us);

// The model's own settings, from its config.
struct ModelFacts {
  std::string name;
  std::string backend;  // resolved
  int max_batch_size = 0;
  Candidate current;                                  // the config as it is (protocol: the start protocol)
  std::string threads_key = "INTRA_OP_THREAD_COUNT";  // "nthread" for XGBoost configs that set it
  bool int8_capable = false;                          // the backend guards quantization (contract 14)
};

// `default_threads`: what the server gives a model without a thread count
// (serve's --intra-op-threads default: cores minus one HTTP thread).
ModelFacts FactsFromSpec(const ModelSpec& spec, const std::string& backend, bool int8_capable, int default_threads,
                         const std::string& start_protocol);

// The dimensions, in the order the search visits them (the protocol first:
// it needs no server restart).
inline const std::vector<std::string> kDimensionNames = {"protocol", "instances",      "threads",
                                                         "batching", "max_batch_size", "int8"};

class TuneSpace {
 public:
  // `cores`: the machine's; instances x threads stay within twice that.
  // `only`: the dimensions searched (kDimensionNames; empty = all of them);
  // the others keep the model's own setting.
  TuneSpace(const ModelFacts& facts, int cores, const std::vector<std::string>& protocols,
            const std::set<std::string>& only = {});

  const std::vector<Dimension>& dims() const { return dims_; }
  const Point& start() const { return start_; }
  Candidate At(const Point& p) const;
  // Worth measuring: within the cores' bound (the start always is), and no
  // int8 once the server refused it.
  bool Allowed(const Point& p) const;
  void DisallowInt8() { int8_refused_ = true; }

 private:
  enum class Kind { kProtocol, kInstances, kThreads, kBatching, kMaxBatch, kInt8 };
  struct Axis {
    Kind kind;
    std::vector<Candidate> settings;  // only the axis's field matters
  };
  void AddAxis(Kind kind, const std::string& name, bool ordered, std::vector<Candidate> settings,
               const Candidate& current);

  ModelFacts facts_;
  int cores_;
  std::vector<Dimension> dims_;
  std::vector<Axis> axes_;
  std::set<std::string> only_;
  Point start_;
  bool int8_refused_ = false;
};

// The edit of the model's config that serves `c` (repository/config_edit.h).
ConfigEdit EditFor(const Candidate& c, const ModelFacts& facts);

}  // namespace inferd::tune
