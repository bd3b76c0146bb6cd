// AccessLog: one JSON line per request (docs/observability.md): time, client
// address, protocol, method and target, model and version, status, latency,
// bytes in and out, trace id, request id. Off by default (--access-log FILE,
// `-` for stdout). A sample rate keeps a share of the successful requests;
// failed ones are always written. Lines are formatted on the request's
// thread and written by a background thread from a bounded queue: a slow disk
// drops lines (counted), never requests. Tokens and bodies are never logged.
//
// Thread-safety: thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <memory>
#include <string>
#include <thread>

#include "core/mutex.h"
#include "core/status.h"

namespace inferd::tracing {

struct AccessLogOptions {
  std::string path;          // "" = off; "-" = standard output
  double sample_rate = 1.0;  // share of successful requests written (0..1)
  size_t max_queue_lines = 65536;
};

struct AccessRecord {
  int64_t unix_ns = 0;   // when the request arrived
  std::string client;    // address:port
  std::string protocol;  // "http", "grpc"
  std::string method;    // HTTP method or gRPC method name
  std::string target;    // HTTP path and query; gRPC: the service/method path
  std::string model;
  std::string version;
  int status = 0;  // HTTP status, or the gRPC status code
  bool failed = false;
  double latency_ms = 0;
  uint64_t bytes_in = 0;
  uint64_t bytes_out = 0;
  std::string trace_id;  // "" when not traced
  std::string request_id;
};

// The line written for `r` (no newline). Pure; tests and the fuzz target use it.
std::string FormatAccessRecord(const AccessRecord& r);

class AccessLog {
 public:
  // Opens (appends to) the file; INVALID_ARGUMENT naming it when it cannot.
  static Result<std::unique_ptr<AccessLog>> Open(const AccessLogOptions& options);
  ~AccessLog();

  // Whether a request with this outcome is written (the sample rate; failures always).
  bool Wanted(bool failed);
  void Write(const AccessRecord& r);
  // Waits (bounded, real time) until every queued line is written. False on timeout.
  bool Flush(std::chrono::milliseconds timeout);

  uint64_t written() const { return written_.load(std::memory_order_relaxed); }
  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }

 private:
  AccessLog(AccessLogOptions options, FILE* file, bool owned);
  void Loop();

  const AccessLogOptions options_;
  FILE* const file_;
  const bool owned_;
  std::atomic<uint64_t> seen_{0}, written_{0}, dropped_{0};
  Mutex mu_;
  CondVar cv_, idle_cv_;
  std::deque<std::string> queue_ TSA_GUARDED_BY(mu_);
  bool writing_ TSA_GUARDED_BY(mu_) = false;
  bool stopping_ TSA_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace inferd::tracing
