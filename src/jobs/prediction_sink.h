// PredictionSink: where a batch job writes its predictions (an SQLite or
// PostgreSQL table, a JSON Lines or CSV file), together with the job's
// checkpoint, so a job that dies resumes where its last commit ended and
// every key is written exactly once.
//
// Table sinks: the table is created when absent with the key column as
// PRIMARY KEY (text), `model_name`, `model_version`, `predicted_at` (Unix
// seconds) and one column per stored output; a row whose key is already
// there is replaced (a job run again stores the newest predictions). Row
// errors go to `<table>_errors` (job_id, row_ordinal, key, message), the
// checkpoint to `inferd_job_checkpoints`; all three in one transaction.
// File sinks: rows are appended, then the checkpoint (with the file's length)
// is written beside the file (`<path>.checkpoint`, atomically replaced); a
// resumed job cuts the file back to that length. Errors go to
// `<path>.errors.jsonl`.
//
// Thread-safety: none; one job thread uses a sink.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "jobs/cell.h"

namespace inferd::jobs {

struct SinkSchema {
  std::string key_column;
  std::vector<std::string> value_columns;  // the stored outputs, in order
};

struct ResultRow {
  std::string key;
  std::string model_version;
  std::vector<Cell> values;  // one per value column
};

struct RowError {
  int64_t ordinal = 0;
  std::string key;  // "" when the row could not be read
  std::string message;
};

struct Checkpoint {
  int64_t rows_done = 0;     // source rows fully handled (written or recorded as errors)
  int64_t rows_written = 0;  // predictions written
  int64_t row_errors = 0;
  bool finished = false;  // the run reached the end of its source
};

class PredictionSink {
 public:
  virtual ~PredictionSink() = default;
  // Creates what is absent; INVALID_ARGUMENT when an existing table lacks a
  // column the schema needs or a column name repeats.
  virtual Status Prepare(const SinkSchema& schema) = 0;
  // The job's last committed checkpoint; nullopt when it never committed.
  virtual Result<std::optional<Checkpoint>> ReadCheckpoint(const std::string& job_id) = 0;
  // Starts the job over: forgets its checkpoint and its row errors (a file
  // sink also empties its file). Rows already in a table stay (replaced as
  // the job writes them again).
  virtual Status Reset(const std::string& job_id) = 0;
  // Writes rows, errors and the checkpoint atomically.
  virtual Status Commit(const std::string& job_id, const std::string& model, const std::vector<ResultRow>& rows,
                        const std::vector<RowError>& errors, const Checkpoint& checkpoint) = 0;
};

// The value columns and key may not use these names.
inline constexpr const char* kReservedColumns[] = {"model_name", "model_version", "predicted_at"};

// JSON Lines: {"<key>": ..., "model_name": ..., "model_version": ..., "<output>": ...} per row.
Result<std::unique_ptr<PredictionSink>> OpenJsonlSink(const std::string& path);
// CSV with a header line; JSON arrays as quoted fields.
Result<std::unique_ptr<PredictionSink>> OpenCsvSink(const std::string& path);

// Unix seconds now (the rows' predicted_at).
double UnixNow();

}  // namespace inferd::jobs
