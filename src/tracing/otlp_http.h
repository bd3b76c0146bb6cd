// OtlpHttpClient: POSTs OTLP bodies to a collector over plain HTTP/1.1 with
// one kept-alive connection (POSIX sockets; a few batches a second do not
// need an event loop). Used by the SpanExporter's thread only.
//
// Thread-safety: not thread-safe (one caller).
#pragma once

#include <chrono>
#include <initializer_list>
#include <string>
#include <string_view>

#include "core/status.h"
#include "tracing/trace_config.h"

namespace inferd::tracing {

class OtlpHttpClient {
 public:
  explicit OtlpHttpClient(CollectorAddress address) : address_(std::move(address)) {}
  ~OtlpHttpClient() { Close(); }
  OtlpHttpClient(const OtlpHttpClient&) = delete;
  OtlpHttpClient& operator=(const OtlpHttpClient&) = delete;

  // OK when the collector answered 2xx; UNAVAILABLE (unreachable, timed out,
  // closed) or the collector's status otherwise. The whole call (connect,
  // send, answer) is bounded by `timeout`. A kept connection the collector
  // closed meanwhile is replaced once.
  Status Post(std::string_view content_type, std::string_view body, std::chrono::milliseconds timeout) {
    return Post(content_type, {body}, timeout);
  }
  // The body in parts, sent as they are (no copy into one buffer).
  Status Post(std::string_view content_type, std::initializer_list<std::string_view> body,
              std::chrono::milliseconds timeout);

 private:
  using Deadline = std::chrono::steady_clock::time_point;
  Status Connect(Deadline deadline);
  // `more`: further data follows at once (MSG_MORE: no short segment).
  Status SendAll(std::string_view data, bool more, Deadline deadline);
  // The status code; the body is read and dropped. `keep` false when the
  // connection must be closed after it.
  Result<int> ReadAnswer(Deadline deadline, bool* keep);
  Result<size_t> ReadSome(char* buf, size_t n, Deadline deadline);
  Status Attempt(std::string_view head, std::initializer_list<std::string_view> body, Deadline deadline);
  void Close();

  const CollectorAddress address_;
  int fd_ = -1;
  std::string pending_;  // read but not yet consumed
};

}  // namespace inferd::tracing
