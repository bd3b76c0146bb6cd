// SpanExporter: OpenTelemetry's batch span processor. Ended spans wait in a
// bounded queue; one background thread sends them in batches (when a batch
// is full, or `schedule_delay` after the last send) through `send` (OTLP/HTTP
// in production, a fake in tests). A full queue drops the span and counts it;
// a failed send drops its batch and counts it: requests never wait for the
// collector.
//
// Thread-safety: Add, Flush and counters are thread-safe. Stop (or the
// destructor) sends what is queued, once, and joins the thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "core/mutex.h"
#include "core/trace.h"

namespace inferd::tracing {

class SpanExporter {
 public:
  struct Options {
    size_t max_queue_size = 2048;
    size_t max_export_batch_size = 512;
    Duration schedule_delay = std::chrono::seconds(5);
  };
  using Send = std::function<Status(const std::vector<SpanRecord>& batch)>;
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

  void Add(SpanRecord span);
  // A trace's spans at once (one lock); those beyond the queue's room are dropped and counted.
  void AddAll(std::vector<SpanRecord> spans);
  // Sends everything queued now and waits (bounded by `timeout`, real time)
  // until it has been handed to `send`. False on timeout. For tests and Stop.
  bool Flush(std::chrono::milliseconds timeout);
  void Stop();
  Counters counters() const;

 private:
  void Loop();

  const Options options_;
  const Send send_;
  Clock* const clock_;
  mutable Mutex mu_;
  CondVar cv_;       // the thread: spans, a flush or a stop
  CondVar idle_cv_;  // Flush: the queue was sent
  std::vector<SpanRecord> queue_ TSA_GUARDED_BY(mu_);
  std::vector<SpanRecord> spare_ TSA_GUARDED_BY(mu_);  // an empty buffer with room, swapped in for a taken batch
  bool stopping_ TSA_GUARDED_BY(mu_) = false;
  bool stopped_ TSA_GUARDED_BY(mu_) = false;
  uint64_t flush_wanted_ TSA_GUARDED_BY(mu_) = 0;  // Flush calls so far
  uint64_t flush_done_ TSA_GUARDED_BY(mu_) = 0;    // flushes the thread finished
  bool sending_ TSA_GUARDED_BY(mu_) = false;
  std::atomic<uint64_t> exported_{0}, dropped_queue_full_{0}, dropped_send_failed_{0}, sends_{0}, send_failures_{0};
  Mutex join_mu_;  // Stop from two threads: one joins
  std::thread thread_ TSA_GUARDED_BY(join_mu_);
};

}  // namespace inferd::tracing
