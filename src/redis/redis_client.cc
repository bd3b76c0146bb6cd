#include "redis/redis_client.h"

#include <hiredis.h>
#include <sys/time.h>

#include <memory>

namespace inferd::redis {
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

RedisReply Convert(const redisReply* r, int depth = 0) {
  RedisReply out;
  switch (r->type) {
    case REDIS_REPLY_STRING:
      out.type = RedisReply::Type::kString;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_STATUS:
      out.type = RedisReply::Type::kStatus;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_ERROR:
      out.type = RedisReply::Type::kError;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_INTEGER:
      out.type = RedisReply::Type::kInteger;
      out.integer = r->integer;
      break;
    case REDIS_REPLY_ARRAY:
      out.type = RedisReply::Type::kArray;
      if (depth < 8)
        for (size_t i = 0; i < r->elements; ++i) out.elements.push_back(Convert(r->element[i], depth + 1));
      break;
    default:
      out.type = RedisReply::Type::kNil;
  }
  return out;
}

Status SendAll(redisContext* c, const std::vector<std::vector<std::string>>& commands) {
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (const auto& cmd : commands) {
    argv.clear();
    lens.clear();
    for (const auto& a : cmd) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    if (redisAppendCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data()) != REDIS_OK)
      return Status::Unavailable(c->errstr);
  }
  return Status::OK();
}

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
  std::vector<std::vector<std::string>> setup;
  if (!endpoint_.password.empty()) setup.push_back({"AUTH", endpoint_.password});
  if (endpoint_.db != 0) setup.push_back({"SELECT", std::to_string(endpoint_.db)});
  if (setup.empty()) return Status::OK();
  if (Status st = SendAll(c, setup); !st.ok()) return Lost(st.message());
  for (const auto& cmd : setup) {
    void* raw = nullptr;
    if (redisGetReply(c, &raw) != REDIS_OK || raw == nullptr) return Lost(c->errstr);
    Reply r(static_cast<redisReply*>(raw));
    if (r->type == REDIS_REPLY_ERROR) return Lost(cmd[0] + " failed: " + std::string(r->str, r->len));
  }
  return Status::OK();
}

Result<std::vector<RedisReply>> RedisClient::Pipeline(const std::vector<std::vector<std::string>>& commands) {
  INFERD_RETURN_IF_ERROR(Connect());
  if (Status st = SendAll(context_, commands); !st.ok()) return Lost(st.message());
  std::vector<RedisReply> out;
  out.reserve(commands.size());
  for (size_t i = 0; i < commands.size(); ++i) {
    void* raw = nullptr;
    if (redisGetReply(context_, &raw) != REDIS_OK || raw == nullptr) return Lost(context_->errstr);
    Reply r(static_cast<redisReply*>(raw));
    out.push_back(Convert(r.get()));
  }
  return out;
}

Result<std::vector<Result<FieldValues>>> RedisClient::HmgetMany(const std::vector<std::string>& keys,
                                                                const std::vector<std::string>& fields) {
  std::vector<std::vector<std::string>> commands;
  commands.reserve(keys.size());
  for (const auto& key : keys) {
    std::vector<std::string> cmd{"HMGET", key};
    cmd.insert(cmd.end(), fields.begin(), fields.end());
    commands.push_back(std::move(cmd));
  }
  INFERD_ASSIGN_OR_RETURN(std::vector<RedisReply> replies, Pipeline(commands));
  std::vector<Result<FieldValues>> out;
  out.reserve(keys.size());
  for (size_t k = 0; k < keys.size(); ++k) {
    const RedisReply& r = replies[k];
    if (r.type == RedisReply::Type::kError) {
      out.emplace_back(Status::Internal("Redis key '" + keys[k].substr(0, 128) + "': " + r.str));
      continue;
    }
    if (r.type != RedisReply::Type::kArray || r.elements.size() != fields.size())
      return Lost("unexpected reply to HMGET");
    FieldValues values;
    values.reserve(fields.size());
    for (const auto& e : r.elements) {
      if (e.type == RedisReply::Type::kString)
        values.emplace_back(e.str);
      else
        values.emplace_back(std::nullopt);
    }
    out.emplace_back(std::move(values));
  }
  return out;
}

}  // namespace inferd::redis
