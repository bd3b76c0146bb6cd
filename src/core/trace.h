// Tracing on the request path (OpenTelemetry's model, docs/observability.md):
// what a traced request carries (TraceParent: its trace and the span its own
// spans go under) and how a span is recorded (Span, ended into its trace's
// SpanSink).
//
// An untraced request carries a null TraceParent: tracing off costs the
// request path one pointer test where a span would start. Tracing on, a span
// is recorded without allocating: its record (attributes and events held in
// place; only string values longer than std::string's inline buffer allocate)
// and a request's contexts live in its trace's buffer (tracing/trace_service).
// The exporter, the sampler and the wire formats live in tracing/.
//
// Thread-safety: a Span belongs to one thread at a time (whoever holds it);
// a TraceParent is immutable and shared. SpanSink's calls are thread-safe.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

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
// are kept as views, so that recording a span allocates only for long values.
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

// At most N items held in place (no allocation); push_back beyond N is
// refused (false) and the caller counts the drop (OTLP's dropped_*_count).
// Only the slots in use are constructed (and so touched): a span's record
// crosses threads, and its unused slots would be memory moved for nothing.
template <typename T, size_t N>
class BoundedList {
 public:
  BoundedList() = default;
  BoundedList(const BoundedList& o) {
    try {
      Append(o);
    } catch (...) {  // a copy that failed (out of memory): the items copied go too
      clear();
      throw;
    }
  }
  BoundedList(BoundedList&& o) noexcept(std::is_nothrow_move_constructible_v<T>) { Append(std::move(o)); }
  BoundedList& operator=(const BoundedList& o) {
    if (this != &o) {
      clear();
      Append(o);
    }
    return *this;
  }
  BoundedList& operator=(BoundedList&& o) noexcept(std::is_nothrow_move_constructible_v<T>) {
    if (this != &o) {
      clear();
      Append(std::move(o));
    }
    return *this;
  }
  ~BoundedList() { clear(); }

  bool push_back(T v) {
    T* slot = add();
    if (slot == nullptr) return false;
    *slot = std::move(v);
    return true;
  }
  // The next slot (default-constructed), or null when full.
  T* add() {
    if (size_ == N) return nullptr;
    T* slot = new (Slot(size_)) T();
    ++size_;  // counted once built: a constructor that throws leaves no slot to destroy
    return slot;
  }
  void clear() {
    for (T& v : *this) v.~T();
    size_ = 0;
  }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T& operator[](size_t i) { return begin()[i]; }
  const T& operator[](size_t i) const { return begin()[i]; }
  T* begin() { return std::launder(reinterpret_cast<T*>(storage_)); }
  T* end() { return begin() + size_; }
  const T* begin() const { return std::launder(reinterpret_cast<const T*>(storage_)); }
  const T* end() const { return begin() + size_; }

 private:
  void* Slot(size_t i) { return storage_ + i * sizeof(T); }
  // `o`'s items after these, each counted once built (both lists hold at most N).
  void Append(const BoundedList& o) {
    for (const T& v : o) {
      new (Slot(size_)) T(v);
      ++size_;
    }
  }
  void Append(BoundedList&& o) {
    for (T& v : o) {
      new (Slot(size_)) T(std::move(v));
      ++size_;
    }
  }

  size_t size_ = 0;
  alignas(T) unsigned char storage_[N * sizeof(T)];
};

// One ended span, as exported. The limits hold what inferd's own spans
// set (a request's root span: 8 attributes; compute: 4 events) and no more:
// a traced request's records are what it touches most, and a record's size
// is memory that crosses threads with it (docs/benchmarks.md, "Tracing").
// A span that sets more drops them and counts them.
struct SpanRecord {
  static constexpr size_t kMaxAttributes = 8;
  static constexpr size_t kMaxEvents = 4;
  TraceId trace_id;
  SpanId span_id = 0;
  SpanId parent_span_id = 0;  // 0: a root span
  std::string trace_state;    // W3C tracestate, passed on unchanged
  std::string name;
  SpanKind kind = SpanKind::kInternal;
  int64_t start_unix_ns = 0;
  int64_t end_unix_ns = 0;
  BoundedList<SpanAttribute, kMaxAttributes> attributes;
  BoundedList<SpanEvent, kMaxEvents> events;
  uint32_t dropped_attributes = 0;  // beyond the limits
  uint32_t dropped_events = 0;
  SpanStatus status = SpanStatus::kUnset;
  std::string status_message;
};

struct TraceParent;

// Where a trace's spans are recorded (tracing/trace_service.h: a request's
// trace buffer, which encodes them for the exporter when the request is
// done; tests: a recording sink). None of its calls blocks.
//
// A span being recorded writes its record where Open put it, and hands it
// back once: Close when it ended, Abandon when it went unended. By default
// the record is the span's own (on the heap) and Close passes it to Record;
// a sink that keeps records in place (a request's trace buffer) hands out its
// own room instead, so that an ended span's record is never moved.
class SpanSink {
 public:
  virtual ~SpanSink() = default;
  // An ended span's record (the default Close's target).
  virtual void Record(SpanRecord&& span) = 0;
  // Room for a new span's record (default-constructed), held until Close or Abandon.
  virtual SpanRecord* Open();
  virtual void Close(SpanRecord* record);
  virtual void Abandon(SpanRecord* record);
  // The context of spans under span `span_id` of `from`'s trace, sharing
  // `from`'s ownership of the sink. This one allocates a small block; a
  // request's trace buffer hands out contexts it holds in place.
  virtual std::shared_ptr<const TraceParent> Child(const std::shared_ptr<const TraceParent>& from, SpanId span_id);
};

// What a traced request carries: spans started for it are children of
// `span_id` in `trace_id`, recorded into `sink`. Whoever holds the shared
// pointer to a TraceParent keeps its sink alive (a request may end after the
// server that traced it began to stop).
struct TraceParent {
  SpanSink* sink = nullptr;  // not owned (see above)
  TraceId trace_id;
  SpanId span_id = 0;  // 0: spans under it are roots
  std::string trace_state;
};

// A context that owns its sink (a trace outside a request's buffer: tests, tools).
std::shared_ptr<const TraceParent> MakeTraceParent(std::shared_ptr<SpanSink> sink, TraceId trace, SpanId span,
                                                   std::string trace_state = {});

// Random ids (a per-thread generator seeded from the OS); never zero.
TraceId NewTraceId();
SpanId NewSpanId();

// Span times are Unix nanoseconds (OTLP's); the request path measures on the
// steady clock: this converts a steady time point (SteadyClock's) to Unix time.
int64_t UnixNanos(TimePoint steady);
int64_t UnixNanosNow();

// A span being recorded. Default-constructed: inactive, every call a no-op.
// Its record is kept by its sink (SpanSink::Open): a span is two pointers,
// cheap to move. One that goes without End is not recorded.
class Span {
 public:
  Span() = default;
  // A child of `parent` (null: an inactive span); holds the parent (and so
  // the sink) until it ends.
  Span(std::shared_ptr<const TraceParent> parent, std::string name, SpanKind kind, int64_t start_unix_ns);
  Span(Span&& o) noexcept : parent_(std::move(o.parent_)), record_(std::exchange(o.record_, nullptr)) {}
  Span& operator=(Span&& o) noexcept;
  ~Span() { Abandon(); }

  bool active() const { return record_ != nullptr; }
  SpanId id() const { return record_ ? record_->span_id : 0; }
  const TraceId& trace_id() const;

  // `key` and `name`: string literals (kept as views). Setting a key again
  // replaces its value. `value`: a string, int64_t, double or bool, stored
  // in place (a string moved in is not copied).
  template <typename V>
  void SetAttribute(std::string_view key, V&& value) {
    if (SpanValue* slot = AttributeSlot(key)) *slot = std::forward<V>(value);
  }
  void AddEvent(std::string_view name, int64_t unix_ns);
  // This span as the parent of what it starts (a request it sends on, the
  // spans recorded under it). Null when inactive.
  std::shared_ptr<const TraceParent> AsParent() const;
  // Records the span (once; later calls do nothing). A non-OK status marks
  // it an error with the status's message.
  void End(int64_t end_unix_ns, const Status& status = Status::OK());

 private:
  // Where `key`'s value goes: its slot, a new one, or null (inactive, or
  // the attributes are full: the drop is counted).
  SpanValue* AttributeSlot(std::string_view key);
  // Hands an unended span's record back to its sink.
  void Abandon() noexcept;

  std::shared_ptr<const TraceParent> parent_;  // null when inactive
  SpanRecord* record_ = nullptr;               // held by parent_'s sink while active
};

}  // namespace inferd
