#include "features/redis/redis_client.h"

#include <hiredis.h>
#include <sys/time.h>

namespace inferd::features {
namespace {

timeval ToTimeval(std::chrono::milliseconds ms) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(ms.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms.count() % 1000) * 1000);
  return tv;
}

struct ReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

}  // namespace

RedisClient::RedisClient(RedisEndpoint endpoint) : endpoint_(std::move(endpoint)) {}

RedisClient::~RedisClient() {
  if (context_) redisFree(context_);
}

Status RedisClient::Lost(const std::string& why) {
  if (context_) redisFree(context_);
  context_ = nullptr;
  last_error_ = why;
  return Status::Unavailable("Redis connection '" + endpoint_.name + "' is down: " + why);
}

Status RedisClient::Connect() {
  if (context_) return Status::OK();
  const auto now = std::chrono::steady_clock::now();
  if (attempted_ && now - *attempted_ < endpoint_.reconnect_interval)
    return Status::Unavailable("Redis connection '" + endpoint_.name + "' is down: " + last_error_);
  attempted_ = now;
  redisContext* c = redisConnectWithTimeout(endpoint_.host.c_str(), endpoint_.port, ToTimeval(endpoint_.timeout));
  if (c == nullptr) return Lost("cannot allocate a connection");
  context_ = c;
  if (c->err) return Lost(c->errstr);
  if (redisSetTimeout(c, ToTimeval(endpoint_.timeout)) != REDIS_OK) return Lost("cannot set the command timeout");
  auto command = [&](std::vector<std::string> args) -> Status {
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (const auto& a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    Reply r(static_cast<redisReply*>(redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data())));
    if (!r) return Lost(c->err ? c->errstr : "no reply");
    if (r->type == REDIS_REPLY_ERROR) {
      const std::string why(r->str, r->len);
      return Lost(args[0] + " failed: " + why);
    }
    return Status::OK();
  };
  if (!endpoint_.password.empty()) INFERD_RETURN_IF_ERROR(command({"AUTH", endpoint_.password}));
  if (endpoint_.db != 0) INFERD_RETURN_IF_ERROR(command({"SELECT", std::to_string(endpoint_.db)}));
  return Status::OK();
}

Result<std::vector<Result<FieldValues>>> RedisClient::HmgetMany(const std::vector<std::string>& keys,
                                                                const std::vector<std::string>& fields) {
  INFERD_RETURN_IF_ERROR(Connect());
  std::vector<const char*> argv(fields.size() + 2);
  std::vector<size_t> lens(fields.size() + 2);
  argv[0] = "HMGET";
  lens[0] = 5;
  for (size_t i = 0; i < fields.size(); ++i) {
    argv[i + 2] = fields[i].data();
    lens[i + 2] = fields[i].size();
  }
  for (const auto& key : keys) {
    argv[1] = key.data();
    lens[1] = key.size();
    if (redisAppendCommandArgv(context_, static_cast<int>(argv.size()), argv.data(), lens.data()) != REDIS_OK)
      return Lost(context_->errstr);
  }
  std::vector<Result<FieldValues>> out;
  out.reserve(keys.size());
  for (const auto& key : keys) {
    void* raw = nullptr;
    if (redisGetReply(context_, &raw) != REDIS_OK || raw == nullptr) return Lost(context_->errstr);
    Reply r(static_cast<redisReply*>(raw));
    if (r->type == REDIS_REPLY_ERROR) {
      out.emplace_back(Status::Internal("Redis key '" + key.substr(0, 128) + "': " + std::string(r->str, r->len)));
      continue;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements != fields.size()) return Lost("unexpected reply to HMGET");
    FieldValues values;
    values.reserve(fields.size());
    for (size_t i = 0; i < r->elements; ++i) {
      const redisReply* e = r->element[i];
      if (e->type == REDIS_REPLY_STRING)
        values.emplace_back(std::string(e->str, e->len));
      else
        values.emplace_back(std::nullopt);
    }
    out.emplace_back(std::move(values));
  }
  return out;
}

}  // namespace inferd::features
