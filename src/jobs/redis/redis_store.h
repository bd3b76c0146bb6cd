// Redis as a prediction table: a batch job's sink and hybrid serving's store
// (docs/batch.md, docs/hybrid.md). A "table" is a key prefix:
//
//   <table>:<key>                  hash: <key column>, model_name, model_version, predicted_at,
//                                  one field per output (its JSON: a number, a string or an array)
//   <table>_errors:<job_id>        hash: row ordinal -> {"key": ..., "message": ...}
//   inferd_job_checkpoints:<job_id> hash: rows_done, rows_written, row_errors, finished, sink_table, updated_at
//
// A commit's rows, errors and checkpoint go in one MULTI/EXEC transaction
// (one round trip), so a resumed job writes every key exactly once (as far
// as the Redis server's own persistence keeps what it acknowledged).
//
// Thread-safety: a sink is used by one job thread; a store's methods are
// thread-safe (one connection, serialized).
#pragma once

#include <memory>
#include <string>

#include "jobs/jobs_config.h"
#include "jobs/prediction_sink.h"
#include "jobs/prediction_store.h"
#include "redis/redis_client.h"

namespace inferd::jobs {

// The client settings of a redis connection of the jobs config.
redis::RedisEndpoint RedisEndpointOf(const std::string& name, const Connection& c);

// Opening does not connect: the first call that needs Redis does (and
// answers UNAVAILABLE while it is down).
std::unique_ptr<PredictionSink> OpenRedisSink(redis::RedisEndpoint endpoint, const std::string& table);
std::unique_ptr<PredictionStore> OpenRedisStore(redis::RedisEndpoint endpoint, StoreTable table);

}  // namespace inferd::jobs
