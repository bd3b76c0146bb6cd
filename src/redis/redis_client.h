// RedisClient: one connection to a Redis server (hiredis stays in this
// folder): commands sent as a pipeline (all written, then all replies read:
// one round trip), used for online feature lookup (features/), Redis
// prediction tables and batch-job sinks (jobs/redis/).
//
// A lost or refused connection answers UNAVAILABLE ("Redis connection 'name'
// is down: ..."; the password is never shown) and is opened again on a later
// call, at most once per `reconnect_interval`, so a Redis that restarts is
// used again without restarting inferd.
//
// Thread-safety: not thread-safe; one thread at a time uses a client.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

struct redisContext;

namespace inferd::redis {

struct RedisEndpoint {
  std::string name;  // the connection's name in the jobs config (messages)
  std::string host = "127.0.0.1";
  int port = 6379;
  std::string password;                     // AUTH when non-empty
  int db = 0;                               // SELECT when non-zero
  std::chrono::milliseconds timeout{1000};  // connect and per-command
  std::chrono::milliseconds reconnect_interval{1000};
};

struct RedisReply {
  enum class Type { kNil, kString, kInteger, kArray, kStatus, kError } type = Type::kNil;
  std::string str;  // kString, kStatus, kError
  int64_t integer = 0;
  std::vector<RedisReply> elements;  // kArray
};

// One HMGET's answer: a value per field (nullopt: the field or the whole hash is missing).
using FieldValues = std::vector<std::optional<std::string>>;

class RedisClient {
 public:
  explicit RedisClient(RedisEndpoint endpoint);
  ~RedisClient();
  RedisClient(const RedisClient&) = delete;
  RedisClient& operator=(const RedisClient&) = delete;

  const std::string& name() const { return endpoint_.name; }

  // Sends every command (its arguments, binary-safe), then reads every
  // reply. UNAVAILABLE when the connection fails (it is dropped: the next
  // call reconnects); an error reply of one command is that reply (kError).
  Result<std::vector<RedisReply>> Pipeline(const std::vector<std::vector<std::string>>& commands);

  // HMGET key fields... for every key, pipelined. A key whose reply is an
  // error (e.g. WRONGTYPE: not a hash) gets INTERNAL naming it.
  Result<std::vector<Result<FieldValues>>> HmgetMany(const std::vector<std::string>& keys,
                                                     const std::vector<std::string>& fields);

 private:
  Status Connect();
  Status Lost(const std::string& why);

  const RedisEndpoint endpoint_;
  redisContext* context_ = nullptr;
  std::optional<std::chrono::steady_clock::time_point> attempted_;
  std::string last_error_;
};

}  // namespace inferd::redis
