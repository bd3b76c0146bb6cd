#include "core/trace.h"

#include <algorithm>
#include <random>
#include <thread>

namespace inferd {
namespace {

// SplitMix64 over a per-thread state seeded from the OS: ids need to be
// unique and unpredictable enough to spread, not secret (OpenTelemetry's
// SDKs use such generators too); a few instructions an id.
uint64_t NextRandom() {
  thread_local uint64_t state = [] {
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32) ^ rd() ^ std::hash<std::thread::id>()(std::this_thread::get_id()) ^
           static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  }();
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t NonZero() {
  uint64_t v;
  do v = NextRandom();
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

std::shared_ptr<const TraceParent> SpanSink::Child(const std::shared_ptr<const TraceParent>& from, SpanId span_id) {
  // The new context keeps `from` (and through it the sink) alive.
  struct Linked {
    std::shared_ptr<const TraceParent> keep;
    TraceParent parent;
  };
  auto block =
      std::make_shared<Linked>(Linked{from, TraceParent{from->sink, from->trace_id, span_id, from->trace_state}});
  return std::shared_ptr<const TraceParent>(block, &block->parent);
}

std::shared_ptr<const TraceParent> MakeTraceParent(std::shared_ptr<SpanSink> sink, TraceId trace, SpanId span,
                                                   std::string trace_state) {
  struct Owning {
    std::shared_ptr<SpanSink> keep;
    TraceParent parent;
  };
  SpanSink* raw = sink.get();
  auto block = std::make_shared<Owning>(Owning{std::move(sink), TraceParent{raw, trace, span, std::move(trace_state)}});
  return std::shared_ptr<const TraceParent>(block, &block->parent);
}

SpanRecord* SpanSink::Open() { return new SpanRecord(); }

void SpanSink::Close(SpanRecord* record) {
  std::unique_ptr<SpanRecord> owned(record);
  Record(std::move(*owned));
}

void SpanSink::Abandon(SpanRecord* record) { delete record; }

Span::Span(std::shared_ptr<const TraceParent> parent, std::string name, SpanKind kind, int64_t start_unix_ns) {
  if (parent == nullptr || parent->sink == nullptr) return;
  SpanRecord* r = parent->sink->Open();
  r->trace_id = parent->trace_id;
  r->parent_span_id = parent->span_id;
  r->trace_state = parent->trace_state;
  r->span_id = NewSpanId();
  r->name = std::move(name);
  r->kind = kind;
  r->start_unix_ns = start_unix_ns;
  record_ = r;
  parent_ = std::move(parent);
}

Span& Span::operator=(Span&& o) noexcept {
  if (this != &o) {
    Abandon();
    parent_ = std::move(o.parent_);
    record_ = std::exchange(o.record_, nullptr);
  }
  return *this;
}

void Span::Abandon() noexcept {
  if (record_ == nullptr) return;
  parent_->sink->Abandon(std::exchange(record_, nullptr));
  parent_.reset();
}

const TraceId& Span::trace_id() const {
  static constexpr TraceId kNone;
  return record_ ? record_->trace_id : kNone;
}

SpanValue* Span::AttributeSlot(std::string_view key) {
  if (!record_) return nullptr;
  for (auto& a : record_->attributes) {
    if (a.key == key) return &a.value;
  }
  SpanAttribute* a = record_->attributes.add();
  if (a == nullptr) {
    ++record_->dropped_attributes;
    return nullptr;
  }
  a->key = key;
  return &a->value;
}

void Span::AddEvent(std::string_view name, int64_t unix_ns) {
  if (!record_) return;
  SpanEvent* e = record_->events.add();
  if (e == nullptr) {
    ++record_->dropped_events;
    return;
  }
  e->name = name;
  e->unix_ns = unix_ns;
}

std::shared_ptr<const TraceParent> Span::AsParent() const {
  if (!record_) return nullptr;
  return parent_->sink->Child(parent_, record_->span_id);
}

void Span::End(int64_t end_unix_ns, const Status& status) {
  if (!record_) return;
  record_->end_unix_ns = std::max(end_unix_ns, record_->start_unix_ns);
  if (!status.ok()) {
    record_->status = SpanStatus::kError;
    record_->status_message = status.message();
  }
  parent_->sink->Close(std::exchange(record_, nullptr));
  parent_.reset();
}

}  // namespace inferd
