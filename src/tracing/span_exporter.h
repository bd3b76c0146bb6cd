// SpanExporter: OpenTelemetry's batch span processor, over encoded spans.
// Requests' spans arrive already encoded (otlp_encoder.h's fragments, written
// by the request's trace buffer) and are copied into the batch being filled:
// the exporter's thread sends a batch (through `send`: OTLP/HTTP in
// production, a fake in tests) when it holds max_export_batch_size spans, or
// `schedule_delay` after the last send. Nothing crosses threads but bytes in
// buffers the exporter owns and reuses: the request path allocates nothing
// here and frees nothing of the exporter's. A full queue drops a request's
// spans and counts them; a failed send drops its batch and counts it:
// requests never wait for the collector.
//
// Thread-safety: Add, Flush and counters are thread-safe. Stop (or the
// destructor) sends what is queued, once, and joins the thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "core/mutex.h"
#include "core/status.h"

namespace inferd::tracing {

class SpanExporter {
 public:
  struct Options {
    size_t max_queue_size = 2048;        // spans waiting, at most
    size_t max_export_batch_size = 512;  // a batch goes when it holds this many (a request's spans stay together)
    Duration schedule_delay = std::chrono::seconds(5);
  };
  // A batch: its spans' fragments, concatenated, and how many spans they are.
  using Send = std::function<Status(std::string_view spans, size_t count)>;
  struct Counters {
    uint64_t exported = 0;             // spans the collector took
    uint64_t dropped_queue_full = 0;   // spans that found the queue full
    uint64_t dropped_send_failed = 0;  // spans of batches the collector did not take
    uint64_t sends = 0;                // OTLP requests made
    uint64_t send_failures = 0;
  };

  // `clock` is not owned and must outlive the exporter.
  SpanExporter(Options options, Send send, Clock* clock);
  ~SpanExporter();

  // `count` spans, encoded (one request's, say): copied into the batch being
  // filled, or dropped and counted when the queue has no room for them all
  // (an empty queue takes them whatever their number).
  void Add(std::string_view spans, size_t count);
  // Sends everything queued now and waits (bounded by `timeout`, real time)
  // until it has been handed to `send`. False on timeout. For tests and Stop.
  bool Flush(std::chrono::milliseconds timeout);
  void Stop();
  Counters counters() const;

 private:
  struct Batch {
    std::string bytes;
    size_t spans = 0;
  };
  void Loop();
  // The next batch to send (a full one, else the one being filled), or false.
  bool TakeBatch(Batch* out) TSA_REQUIRES(mu_);

  const Options options_;
  const Send send_;
  Clock* const clock_;
  mutable Mutex mu_;
  CondVar cv_;                                          // the thread: a batch started or filled, a flush or a stop
  CondVar idle_cv_;                                     // Flush: the queue was sent
  std::deque<Batch> full_ TSA_GUARDED_BY(mu_);          // oldest first
  Batch filling_ TSA_GUARDED_BY(mu_);                   // the batch spans are copied into
  std::vector<std::string> spare_ TSA_GUARDED_BY(mu_);  // sent batches' buffers, kept (with their room) for reuse
  size_t queued_spans_ TSA_GUARDED_BY(mu_) = 0;         // in full_ and filling_
  bool stopping_ TSA_GUARDED_BY(mu_) = false;
  bool stopped_ TSA_GUARDED_BY(mu_) = false;
  uint64_t flush_wanted_ TSA_GUARDED_BY(mu_) = 0;  // Flush calls so far
  uint64_t flush_done_ TSA_GUARDED_BY(mu_) = 0;    // flushes the thread finished
  std::atomic<uint64_t> exported_{0}, dropped_queue_full_{0}, dropped_send_failed_{0}, sends_{0}, send_failures_{0};
  Mutex join_mu_;  // Stop from two threads: one joins
  std::thread thread_ TSA_GUARDED_BY(join_mu_);
};

}  // namespace inferd::tracing
