#include "jobs/redis/redis_store.h"

#include <charconv>
#include <cstdlib>
#include <set>

#include "core/mutex.h"

namespace inferd::jobs {
namespace {

using redis::RedisReply;

std::string CheckpointKey(const std::string& job_id) { return "inferd_job_checkpoints:" + job_id; }

// The transaction's replies: ..., EXEC's array; an aborted or failed one is an error.
Status ExecStatus(const redis::RedisClient& client, const std::vector<RedisReply>& replies) {
  for (const auto& r : replies)
    if (r.type == RedisReply::Type::kError)
      return Status::Internal("Redis connection '" + client.name() + "': " + r.str);
  if (replies.empty() || replies.back().type != RedisReply::Type::kArray)
    return Status::Internal("Redis connection '" + client.name() + "': the transaction did not run");
  for (const auto& r : replies.back().elements)
    if (r.type == RedisReply::Type::kError)
      return Status::Internal("Redis connection '" + client.name() + "': " + r.str);
  return Status::OK();
}

int64_t ToInt(const std::string& s) {
  int64_t v = 0;
  std::from_chars(s.data(), s.data() + s.size(), v);
  return v;
}

class RedisSink final : public PredictionSink {
 public:
  RedisSink(redis::RedisEndpoint endpoint, std::string table)
      : client_(std::move(endpoint)), table_(std::move(table)) {}

  Status Prepare(const SinkSchema& schema) override {
    std::set<std::string> names;
    std::vector<std::string> all = {schema.key_column};
    for (const char* r : kReservedColumns) all.push_back(r);
    for (const auto& v : schema.value_columns) all.push_back(v);
    for (const auto& n : all)
      if (!names.insert(n).second)
        return Status::InvalidArgument("sink table '" + table_ + "': field name '" + n + "' is used twice");
    schema_ = schema;
    // Reachable now, so an unreachable Redis is refused before the job starts.
    auto ping = client_.Pipeline({{"PING"}});
    return ping.ok() ? Status::OK() : ping.status();
  }

  Result<std::optional<Checkpoint>> ReadCheckpoint(const std::string& job_id) override {
    INFERD_ASSIGN_OR_RETURN(auto replies, client_.Pipeline({{"HGETALL", CheckpointKey(job_id)}}));
    const RedisReply& r = replies[0];
    if (r.type == RedisReply::Type::kError) return Status::Internal("Redis: " + r.str);
    if (r.elements.empty()) return std::optional<Checkpoint>();
    Checkpoint cp;
    for (size_t i = 0; i + 1 < r.elements.size(); i += 2) {
      const std::string& f = r.elements[i].str;
      const std::string& v = r.elements[i + 1].str;
      if (f == "rows_done") cp.rows_done = ToInt(v);
      if (f == "rows_written") cp.rows_written = ToInt(v);
      if (f == "row_errors") cp.row_errors = ToInt(v);
      if (f == "finished") cp.finished = v == "1";
    }
    return std::optional<Checkpoint>(cp);
  }

  Status Reset(const std::string& job_id) override {
    INFERD_ASSIGN_OR_RETURN(auto replies,
                            client_.Pipeline({{"DEL", CheckpointKey(job_id), table_ + "_errors:" + job_id}}));
    if (replies[0].type == RedisReply::Type::kError) return Status::Internal("Redis: " + replies[0].str);
    return Status::OK();
  }

  Status Commit(const std::string& job_id, const std::string& model, const std::vector<ResultRow>& rows,
                const std::vector<RowError>& errors, const Checkpoint& checkpoint) override {
    std::vector<std::vector<std::string>> cmds;
    cmds.reserve(rows.size() + 4);
    cmds.push_back({"MULTI"});
    const std::string now = std::to_string(UnixNow());
    for (const auto& row : rows) {
      std::vector<std::string> c = {"HSET", table_ + ":" + row.key, schema_.key_column, row.key,        "model_name",
                                    model,  "model_version",        row.model_version,  "predicted_at", now};
      for (size_t i = 0; i < schema_.value_columns.size(); ++i) {
        c.push_back(schema_.value_columns[i]);
        c.push_back(i < row.values.size() ? CellJson(row.values[i]) : "null");
      }
      cmds.push_back(std::move(c));
    }
    if (!errors.empty()) {
      std::vector<std::string> c = {"HSET", table_ + "_errors:" + job_id};
      for (const auto& e : errors) {
        c.push_back(std::to_string(e.ordinal));
        c.push_back("{\"key\":" + JsonString(e.key) + ",\"message\":" + JsonString(e.message) + "}");
      }
      cmds.push_back(std::move(c));
    }
    cmds.push_back({"HSET", CheckpointKey(job_id), "sink_table", table_, "rows_done",
                    std::to_string(checkpoint.rows_done), "rows_written", std::to_string(checkpoint.rows_written),
                    "row_errors", std::to_string(checkpoint.row_errors), "finished", checkpoint.finished ? "1" : "0",
                    "updated_at", now});
    cmds.push_back({"EXEC"});
    INFERD_ASSIGN_OR_RETURN(auto replies, client_.Pipeline(cmds));
    return ExecStatus(client_, replies);
  }

 private:
  redis::RedisClient client_;
  const std::string table_;
  SinkSchema schema_;
};

class RedisStore final : public PredictionStore {
 public:
  RedisStore(redis::RedisEndpoint endpoint, StoreTable table)
      : client_(std::move(endpoint)), table_(std::move(table)) {}

  Result<std::optional<StoredPrediction>> Lookup(const std::string& key) override {
    std::vector<std::string> cmd = {"HMGET", table_.table + ":" + key, "model_name", "model_version", "predicted_at"};
    for (const auto& v : table_.value_columns) cmd.push_back(v);
    MutexLock l(&mu_);
    INFERD_ASSIGN_OR_RETURN(auto replies, client_.Pipeline({cmd}));
    const RedisReply& r = replies[0];
    if (r.type == RedisReply::Type::kError) return Status::Internal("Redis key '" + cmd[1] + "': " + r.str);
    if (r.type != RedisReply::Type::kArray || r.elements.size() != cmd.size() - 2)
      return Status::Internal("Redis: unexpected reply to HMGET");
    if (r.elements[0].type != RedisReply::Type::kString) return std::optional<StoredPrediction>();
    StoredPrediction p;
    p.model_name = r.elements[0].str;
    p.model_version = r.elements[1].str;
    p.predicted_at = std::strtod(r.elements[2].str.c_str(), nullptr);
    for (size_t i = 3; i < r.elements.size(); ++i) {
      if (r.elements[i].type == RedisReply::Type::kString)
        p.values.emplace_back(JsonText{r.elements[i].str});  // each value is stored as its JSON
      else
        p.values.emplace_back(std::monostate{});
    }
    return std::optional<StoredPrediction>(std::move(p));
  }

  Status Write(const std::string& key, const std::string& model, const std::string& version,
               const std::vector<Cell>& values) override {
    std::vector<std::string> cmd = {
        "HSET",  table_.table + ":" + key, table_.key_column,        key, "model_name", model, "model_version",
        version, "predicted_at",           std::to_string(UnixNow())};
    for (size_t i = 0; i < table_.value_columns.size(); ++i) {
      cmd.push_back(table_.value_columns[i]);
      cmd.push_back(i < values.size() ? CellJson(values[i]) : "null");
    }
    MutexLock l(&mu_);
    INFERD_ASSIGN_OR_RETURN(auto replies, client_.Pipeline({cmd}));
    if (replies[0].type == RedisReply::Type::kError) return Status::Internal("Redis: " + replies[0].str);
    return Status::OK();
  }

 private:
  Mutex mu_;
  redis::RedisClient client_ TSA_GUARDED_BY(mu_);
  const StoreTable table_;
};

}  // namespace

redis::RedisEndpoint RedisEndpointOf(const std::string& name, const Connection& c) {
  redis::RedisEndpoint e;
  e.name = name;
  e.host = c.host;
  e.port = c.port;
  e.password = c.password;
  e.db = c.db;
  return e;
}

std::unique_ptr<PredictionSink> OpenRedisSink(redis::RedisEndpoint endpoint, const std::string& table) {
  return std::make_unique<RedisSink>(std::move(endpoint), table);
}

std::unique_ptr<PredictionStore> OpenRedisStore(redis::RedisEndpoint endpoint, StoreTable table) {
  return std::make_unique<RedisStore>(std::move(endpoint), std::move(table));
}

}  // namespace inferd::jobs
