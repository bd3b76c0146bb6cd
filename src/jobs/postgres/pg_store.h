// PostgreSQL as a batch job's source and sink. libpq's headers stay in this
// folder.
//
// Connections come from the operator's jobs config (a libpq conninfo string
// under a name); errors never show the conninfo (credentials), only the
// connection's name and libpq's message.
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

// A read-only query: one SELECT run in a READ ONLY, REPEATABLE READ
// transaction (the count and the rows see one snapshot), fetched through a
// cursor in chunks, ordered by `order_by` (the job's key column). Cells:
// integers and reals as numbers, json/jsonb as JSON text, numeric arrays as
// NumberArray, the rest as text. INVALID_ARGUMENT for a failed connection or
// an SQL error (libpq's message).
Result<std::unique_ptr<RowSource>> OpenPostgresSource(const std::string& name, const std::string& conninfo,
                                                      const std::string& query, const std::string& order_by);
// Writes `table` (created when absent: key TEXT PRIMARY KEY, model_name,
// model_version, predicted_at DOUBLE PRECISION, one JSONB column per output),
// `<table>_errors` and `inferd_job_checkpoints`, one transaction per commit.
Result<std::unique_ptr<PredictionSink>> OpenPostgresSink(const std::string& name, const std::string& conninfo,
                                                         const std::string& table);

// Reads (and writes back to) a prediction table over a named connection. A
// table that does not exist (yet) reads as empty. A lost connection answers
// UNAVAILABLE; a later call reconnects (at most once per
// table.reconnect_interval). Opening does not fail when the server is down:
// the first lookups answer UNAVAILABLE until it is up.
std::unique_ptr<PredictionStore> OpenPostgresStore(const std::string& name, const std::string& conninfo,
                                                   StoreTable table);

}  // namespace inferd::jobs
