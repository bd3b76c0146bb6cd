// JobSpec: what a batch prediction job does, parsed from its JSON form (the
// body of POST /v2/jobs, the file `inferd batch --job` reads; docs/batch.md).
//
//   {"model": "mlp", "version": "",                 version optional ("" = the default)
//    "source": {"type": "csv", "path": "in.csv"},   csv | jsonl: path;
//                                                   sqlite: path or connection, query;
//                                                   postgres: connection, query
//    "sink":   {"type": "sqlite", "path": "out.db", "table": "predictions"},
//                                                   sqlite: path or connection, table;
//                                                   postgres: connection, table; csv | jsonl: path
//    "key": "id",                                   the source column that names a row
//    "inputs": {"x": ["f0", "f1", "f2"]},           tensor <- columns, in order; a column may hold a
//                                                   JSON array (its elements, flattened); or one
//                                                   column as a string: {"x": "features"}
//    "outputs": ["y"],                              optional; default every output of the model
//    "rows_per_request": 16,                        optional; default the model's max_batch_size
//    "max_in_flight": 4,                            optional; requests submitted and not answered
//    "commit_rows": 1000,                           optional; rows per sink transaction
//    "max_row_errors": 100}                         optional; more row errors fail the job
//
// Parsing checks the form only (types, required fields, ranges, limits);
// names are checked against the model and the source when the job starts.
//
// Thread-safety: plain values.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace inferd::jobs {

// kRedis names only a connection of the jobs config (online features), never a job's source or sink.
enum class StoreType { kCsv, kJsonl, kSqlite, kPostgres, kRedis };
std::string_view StoreTypeName(StoreType t);

struct SourceSpec {
  StoreType type = StoreType::kCsv;
  std::string path;        // csv, jsonl, sqlite (a file)
  std::string connection;  // sqlite, postgres: a connection the operator named (jobs config)
  std::string query;       // sqlite, postgres: a read-only SELECT
};

struct SinkSpec {
  StoreType type = StoreType::kSqlite;
  std::string path;        // csv, jsonl, sqlite (a file)
  std::string connection;  // sqlite, postgres
  std::string table;       // sqlite, postgres; created when absent
};

struct InputMapping {
  std::string tensor;
  std::vector<std::string> columns;  // each adds one element, or a JSON array's elements
};

struct JobSpec {
  std::string model;
  std::string version;  // "" = the default version
  SourceSpec source;
  SinkSpec sink;
  std::string key;
  std::vector<InputMapping> inputs;  // in the order given
  std::vector<std::string> outputs;  // empty = every output of the model
  int64_t rows_per_request = 0;      // 0 = the model's max_batch_size (1 without batching)
  int64_t max_in_flight = 4;
  int64_t commit_rows = 1000;
  int64_t max_row_errors = 100;
};

// Limits on what a spec may contain.
inline constexpr size_t kMaxSpecBytes = 1 << 20;
inline constexpr size_t kMaxNameBytes = 256;
inline constexpr size_t kMaxQueryBytes = 64 << 10;
inline constexpr size_t kMaxMappedColumns = 1 << 16;
inline constexpr int64_t kMaxInFlight = 1024;
inline constexpr int64_t kMaxRowsPerRequest = 1 << 16;
inline constexpr int64_t kMaxCommitRows = 1 << 20;

// INVALID_ARGUMENT naming the field for anything malformed.
Result<JobSpec> ParseJobSpec(std::string_view json);
// The JSON form again (ParseJobSpec(ToJson(s)) == s): job records.
std::string ToJson(const JobSpec& spec);

// A table or column name is an SQL identifier inferd quotes: letters, digits
// and '_', not starting with a digit, at most 63 bytes (PostgreSQL's limit).
bool IsSqlIdentifier(std::string_view name);

}  // namespace inferd::jobs
