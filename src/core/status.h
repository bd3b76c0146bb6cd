// Status and Result<T>: errors as values.
//
// Every fallible call in inferd returns a Status (or a Result<T> carrying a
// value on success). Codes are transport-neutral; front ends map them to HTTP
// or gRPC codes at the edge (see frontends/common/status_mapping.h).
//
// Thread-safety: Status and Result are plain values; distinct objects may be
// used from distinct threads without synchronization.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace inferd {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     // the caller sent something malformed (HTTP 400)
  kNotFound,            // unknown model / version / route (HTTP 404)
  kUnavailable,         // overloaded or not ready: retry later (HTTP 503)
  kInternal,            // a bug or a backend failure (HTTP 500)
  kUnimplemented,       // a feature this server does not offer (HTTP 501)
  kDeadlineExceeded,    // request timed out in the queue (HTTP 503 like Triton)
  kFailedPrecondition,  // the operation is not allowed in this state (HTTP 400)
  kResourceExhausted,   // a size limit was exceeded (HTTP 413 where relevant)
  kAlreadyExists,
  kCancelled,         // the client gave up (cancelled the call or its deadline passed) (HTTP 400 like Triton)
  kUnauthenticated,   // a protected route without the right credentials (HTTP 401)
  kPermissionDenied,  // authenticated, but the target is not allowed (a job's path outside the allowed dirs) (HTTP 403)
  kRateLimited,       // over a request rate: retry later (HTTP 429; gRPC RESOURCE_EXHAUSTED)
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status OK() { return Status(); }
  static Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
  static Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
  static Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
  static Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
  static Status Unimplemented(std::string m) { return {StatusCode::kUnimplemented, std::move(m)}; }
  static Status DeadlineExceeded(std::string m) { return {StatusCode::kDeadlineExceeded, std::move(m)}; }
  static Status FailedPrecondition(std::string m) { return {StatusCode::kFailedPrecondition, std::move(m)}; }
  static Status ResourceExhausted(std::string m) { return {StatusCode::kResourceExhausted, std::move(m)}; }
  static Status AlreadyExists(std::string m) { return {StatusCode::kAlreadyExists, std::move(m)}; }
  static Status Cancelled(std::string m) { return {StatusCode::kCancelled, std::move(m)}; }
  static Status Unauthenticated(std::string m) { return {StatusCode::kUnauthenticated, std::move(m)}; }
  static Status PermissionDenied(std::string m) { return {StatusCode::kPermissionDenied, std::move(m)}; }
  static Status RateLimited(std::string m) { return {StatusCode::kRateLimited, std::move(m)}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // "CODE: message", for logs.
  std::string ToString() const;

  // Returns a copy with "prefix: " prepended to the message (same code).
  Status WithPrefix(std::string_view prefix) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// Result<T>: either a T or a non-OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}         // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {  // NOLINT
    if (status_.ok()) status_ = Status::Internal("Result constructed from OK status without a value");
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }

  // REQUIRES: ok().
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }
  T&& operator*() && { return std::move(*value_); }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace inferd

#define INFERD_CONCAT_INNER(a, b) a##b
#define INFERD_CONCAT(a, b) INFERD_CONCAT_INNER(a, b)

#define INFERD_RETURN_IF_ERROR(expr)         \
  do {                                       \
    ::inferd::Status _inferd_st = (expr);    \
    if (!_inferd_st.ok()) return _inferd_st; \
  } while (0)

#define INFERD_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()

#define INFERD_ASSIGN_OR_RETURN(lhs, expr) \
  INFERD_ASSIGN_OR_RETURN_IMPL(INFERD_CONCAT(_inferd_res_, __LINE__), lhs, expr)
