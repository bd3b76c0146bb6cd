#include "core/trace.h"

#include <algorithm>
#include <random>
#include <thread>

namespace inferd {
namespace {

std::mt19937_64& Generator() {
  thread_local std::mt19937_64 gen([] {
    std::random_device rd;
    const uint64_t seed = (static_cast<uint64_t>(rd()) << 32) ^ rd() ^
                          std::hash<std::thread::id>()(std::this_thread::get_id()) ^
                          static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    return seed;
  }());
  return gen;
}

uint64_t NonZero() {
  uint64_t v;
  do v = Generator()();
  while (v == 0);
  return v;
}

}  // namespace

TraceId NewTraceId() { return TraceId{NonZero(), NonZero()}; }
SpanId NewSpanId() { return NonZero(); }

// Unix time = steady time + an offset, read from both clocks at most once a
// second per thread (so a step or slew of the system clock shows within a
// second); a span's times cost one addition each.
int64_t UnixNanos(TimePoint steady) {
  struct Offset {
    bool valid = false;
    int64_t taken_at = 0;  // steady ns
    int64_t unix_minus_steady = 0;
  };
  thread_local Offset offset;
  const int64_t t = steady.time_since_epoch().count();
  // Earlier time points (a request's arrival) convert with the offset at hand.
  if (!offset.valid || t > offset.taken_at + 1'000'000'000) {
    offset.valid = true;
    const int64_t now_steady =
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
            .count();
    offset.unix_minus_steady = UnixNanosNow() - now_steady;
    offset.taken_at = t;
  }
  return t + offset.unix_minus_steady;
}

int64_t UnixNanosNow() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Span::Span(const TraceParent* parent, std::string name, SpanKind kind, int64_t start_unix_ns) {
  if (parent == nullptr || parent->sink == nullptr) return;
  sink_ = parent->sink;
  record_.trace_id = parent->trace_id;
  record_.parent_span_id = parent->span_id;
  record_.trace_state = parent->trace_state;
  record_.span_id = NewSpanId();
  record_.name = std::move(name);
  record_.kind = kind;
  record_.start_unix_ns = start_unix_ns;
}

Span::Span(std::shared_ptr<SpanSink> sink, TraceId trace, SpanId parent, std::string trace_state, std::string name,
           SpanKind kind, int64_t start_unix_ns)
    : sink_(std::move(sink)) {
  if (!sink_) return;
  record_.trace_id = trace;
  record_.parent_span_id = parent;
  record_.trace_state = std::move(trace_state);
  record_.span_id = NewSpanId();
  record_.name = std::move(name);
  record_.kind = kind;
  record_.start_unix_ns = start_unix_ns;
}

void Span::SetAttribute(std::string_view key, SpanValue value) {
  if (!sink_) return;
  for (auto& a : record_.attributes) {
    if (a.key == key) {
      a.value = std::move(value);
      return;
    }
  }
  if (record_.attributes.empty()) record_.attributes.reserve(8);
  record_.attributes.push_back({key, std::move(value)});
}

void Span::AddEvent(std::string_view name, int64_t unix_ns) {
  if (!sink_) return;
  if (record_.events.empty()) record_.events.reserve(4);
  record_.events.push_back({name, unix_ns});
}

std::shared_ptr<const TraceParent> Span::AsParent() const {
  if (!sink_) return nullptr;
  auto p = std::make_shared<TraceParent>();
  p->sink = sink_;
  p->trace_id = record_.trace_id;
  p->span_id = record_.span_id;
  p->trace_state = record_.trace_state;
  return p;
}

void Span::End(int64_t end_unix_ns, const Status& status) {
  if (!sink_) return;
  record_.end_unix_ns = std::max(end_unix_ns, record_.start_unix_ns);
  if (!status.ok()) {
    record_.status = SpanStatus::kError;
    record_.status_message = status.message();
  }
  auto sink = std::move(sink_);
  sink_ = nullptr;
  sink->Record(std::move(record_));
}

}  // namespace inferd
