// Tracing on the request path (OpenTelemetry's model, docs/observability.md):
// what a traced request carries (TraceParent: its trace and the span its own
// spans go under) and how a span is recorded (Span, ended into a SpanSink).
//
// An untraced request carries a null TraceParent: tracing off costs the
// request path one pointer test where a span would start. The exporter, the
// sampler and the wire formats live in tracing/.
//
// Thread-safety: a Span belongs to one thread at a time (whoever holds it);
// a TraceParent is immutable and shared. SpanSink::Record is thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/clock.h"
#include "core/status.h"

namespace inferd {

// A W3C / OpenTelemetry trace id (16 bytes, `hi` first on the wire); all zero is invalid.
struct TraceId {
  uint64_t hi = 0;
  uint64_t lo = 0;
  bool valid() const { return (hi | lo) != 0; }
  friend bool operator==(const TraceId&, const TraceId&) = default;
};
using SpanId = uint64_t;  // 8 bytes; 0 is invalid

using SpanValue = std::variant<std::string, int64_t, double, bool>;
// Attribute keys and event names are string literals (static storage): they
// are kept as views, so that recording a span allocates only for its values.
struct SpanAttribute {
  std::string_view key;
  SpanValue value;
};
struct SpanEvent {
  std::string_view name;
  int64_t unix_ns = 0;
};
// OTLP's numbers.
enum class SpanKind : uint8_t { kInternal = 1, kServer = 2, kClient = 3 };
enum class SpanStatus : uint8_t { kUnset = 0, kOk = 1, kError = 2 };

// One ended span, as exported.
struct SpanRecord {
  TraceId trace_id;
  SpanId span_id = 0;
  SpanId parent_span_id = 0;  // 0: a root span
  std::string trace_state;    // W3C tracestate, passed on unchanged
  std::string name;
  SpanKind kind = SpanKind::kInternal;
  int64_t start_unix_ns = 0;
  int64_t end_unix_ns = 0;
  std::vector<SpanAttribute> attributes;
  std::vector<SpanEvent> events;
  SpanStatus status = SpanStatus::kUnset;
  std::string status_message;
};

// Where ended spans go (tracing/trace_service.h: the exporter's queue, the
// recent traces). Record never blocks: a full queue drops and counts.
class SpanSink {
 public:
  virtual ~SpanSink() = default;
  virtual void Record(SpanRecord span) = 0;
};

// What a traced request carries: spans started for it are children of
// `span_id` in `trace_id`, recorded into `sink` (shared: a request may end
// after the server that traced it began to stop).
struct TraceParent {
  std::shared_ptr<SpanSink> sink;
  TraceId trace_id;
  SpanId span_id = 0;
  std::string trace_state;
};

// Random ids (a per-thread generator seeded from the OS); never zero.
TraceId NewTraceId();
SpanId NewSpanId();

// Span times are Unix nanoseconds (OTLP's); the request path measures on the
// steady clock: this converts a steady time point (SteadyClock's) to Unix time.
int64_t UnixNanos(TimePoint steady);
int64_t UnixNanosNow();

// A span being recorded. Default-constructed: inactive, every call a no-op.
class Span {
 public:
  Span() = default;
  // A child of `parent` (null: an inactive span).
  Span(const TraceParent* parent, std::string name, SpanKind kind, int64_t start_unix_ns);
  // A span with an explicit trace and parent (a request's root span: the
  // parent is the client's, 0 for none).
  Span(std::shared_ptr<SpanSink> sink, TraceId trace, SpanId parent, std::string trace_state, std::string name,
       SpanKind kind, int64_t start_unix_ns);
  Span(Span&&) = default;
  Span& operator=(Span&&) = default;

  bool active() const { return sink_ != nullptr; }
  SpanId id() const { return record_.span_id; }
  const TraceId& trace_id() const { return record_.trace_id; }

  // `key` and `name`: string literals (kept as views).
  void SetAttribute(std::string_view key, SpanValue value);
  void AddEvent(std::string_view name, int64_t unix_ns);
  // This span as the parent of what it starts (a request it sends on, the
  // spans recorded under it). Null when inactive.
  std::shared_ptr<const TraceParent> AsParent() const;
  // Records the span (once; later calls do nothing). A non-OK status marks
  // it an error with the status's message.
  void End(int64_t end_unix_ns, const Status& status = Status::OK());

 private:
  std::shared_ptr<SpanSink> sink_;
  SpanRecord record_;
};

}  // namespace inferd
