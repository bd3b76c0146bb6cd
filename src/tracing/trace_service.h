// TraceService: tracing's service beside the server (docs/observability.md):
// decides which requests are traced (Triton's rate and count; a request
// whose W3C parent context is sampled always is, one whose parent is not
// sampled never is), starts their root spans, and hands their spans to the
// SpanExporter, which sends them to the collector over OTLP/HTTP.
//
// A traced request's spans are recorded into a trace buffer of its own (one
// allocation per request): a span writes its record there from its start and
// its end only marks it ended (no lock, no copy), the contexts handed out
// under it (TraceParent) live in it too, and when the last holder of its
// contexts lets go (the request is done: after its answer went out) its spans
// are encoded, all at once (OTLP's protobuf or JSON fragments, into the
// thread's own scratch), and copied into the exporter's batch (one lock of
// the exporter per request). A few requests a second also keep their span
// records for the web console (recent()).
//
// An untraced request costs nothing here when no access log is kept: front
// ends ask RequestObserver::Decide first and let it pass unobserved.
//
// Thread-safety: thread-safe. Ownership: shared (trace buffers hold it);
// Stop sends what is queued and ends the exporter's thread, later spans are
// dropped and counted.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <string_view>

#include "core/clock.h"
#include "core/trace.h"
#include "tracing/recent_traces.h"
#include "tracing/span_exporter.h"
#include "tracing/trace_config.h"

namespace inferd::tracing {

class TraceService final : public std::enable_shared_from_this<TraceService> {
 public:
  // Sends to the collector at config.url (INVALID_ARGUMENT for a bad url).
  // `clock` is not owned and must outlive the service.
  static Result<std::shared_ptr<TraceService>> Create(const TraceConfig& config, Clock* clock);
  // With another way to send batches (tests): `send` gets fragments in the
  // config's encoding (otlp_encoder.h; WrapOtlp* makes them a body).
  static std::shared_ptr<TraceService> CreateWithSender(const TraceConfig& config, SpanExporter::Send send,
                                                        Clock* clock);
  ~TraceService();

  // Whether a request that arrives with these W3C headers ("" = absent) is
  // traced, and under which trace. An unreadable traceparent counts as
  // absent. Each call is one request for the rate and the count.
  struct Decision {
    TraceId trace;      // invalid: not traced
    SpanId parent = 0;  // the client's span (0: none)
    std::string state;  // its tracestate, sanitized
    bool traced() const { return trace.valid(); }
  };
  Decision Decide(std::string_view traceparent, std::string_view tracestate);
  // The request's root span (kind SERVER, named `name`), active when the decision traced it.
  Span StartRequest(Decision&& decision, std::string name, int64_t start_unix_ns);

  bool Flush(std::chrono::milliseconds timeout) { return exporter_->Flush(timeout); }
  void Stop() { exporter_->Stop(); }

  struct Counters {
    uint64_t traces_by_rate = 0;       // started by the sampling rate
    uint64_t traces_propagated = 0;    // started because the client's context was sampled
    uint64_t invalid_traceparent = 0;  // unreadable headers (ignored)
    uint64_t spans_recorded = 0;
    SpanExporter::Counters exporter;
  };
  Counters counters() const;
  const TraceConfig& config() const { return config_; }
  // The last traced requests (the web console's traces page).
  const RecentTraces& recent() const { return recent_; }

 private:
  friend class TraceBuffer;
  TraceService(const TraceConfig& config, SpanExporter::Send send, Clock* clock);
  // The rate's and count's decision for a request without a sampled parent.
  bool SampleByRate();
  // A request's trace buffer let go of its spans.
  void Export(std::string_view encoded, size_t count) {
    recorded_.fetch_add(count, std::memory_order_relaxed);
    exporter_->Add(encoded, count);
  }

  const TraceConfig config_;
  std::unique_ptr<SpanExporter> exporter_;
  RecentTraces recent_;
  std::atomic<uint64_t> seen_{0};
  std::atomic<int64_t> count_left_;
  std::atomic<uint64_t> by_rate_{0}, propagated_{0}, invalid_{0}, recorded_{0};
};

}  // namespace inferd::tracing
