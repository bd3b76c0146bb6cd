// SQLite as a batch job's source and sink (and, later, a hybrid-serving
// prediction store). sqlite3.h stays in this folder.
//
// Thread-safety: each object is used by one thread at a time.
#pragma once

#include <memory>
#include <string>

#include "core/status.h"
#include "jobs/prediction_sink.h"
#include "jobs/prediction_store.h"
#include "jobs/row_source.h"

namespace inferd::jobs {

// A read-only query: the database is opened read-only, the statement must be
// one SELECT (sqlite3_stmt_readonly) and runs inside a read transaction.
// Rows come ordered by `order_by` (the job's key column), so a resumed job
// meets them in the same order. INVALID_ARGUMENT for SQL errors, naming them.
Result<std::unique_ptr<RowSource>> OpenSqliteSource(const std::string& path, const std::string& query,
                                                    const std::string& order_by);
// Writes `table` in the database at `path` (created when absent), WAL mode.
Result<std::unique_ptr<PredictionSink>> OpenSqliteSink(const std::string& path, const std::string& table);

// Reads (and writes back to) a prediction table in the database at `path`.
// A table that does not exist (yet: a job creates it) reads as empty.
// `writable` false opens the database read-only (Write answers
// FAILED_PRECONDITION).
Result<std::unique_ptr<PredictionStore>> OpenSqliteStore(const std::string& path, StoreTable table, bool writable);

}  // namespace inferd::jobs
