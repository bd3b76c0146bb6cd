#include "tracing/trace_service.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <new>
#include <utility>
#include <vector>

#include "core/mutex.h"
#include "tracing/otlp_encoder.h"
#include "tracing/otlp_http.h"
#include "tracing/trace_context.h"

namespace inferd::tracing {

namespace {

// The console's share of the traced requests: a page of the last ones needs no more.
constexpr uint32_t kRecentTracesPerSecond = 10;

}  // namespace

// (Not in the anonymous namespace: TraceBuffer, TraceService's friend, holds two.)
// Up to N items built in place as they are claimed, from any thread (one
// atomic add each); a claim beyond N gets null and the caller places the item
// elsewhere. Only claimed slots are built (and so touched): the memory crosses
// threads with the request. Destroys what it built.
template <typename T, size_t N>
class ClaimedSlots {
 public:
  ClaimedSlots() = default;
  ClaimedSlots(const ClaimedSlots&) = delete;
  ClaimedSlots& operator=(const ClaimedSlots&) = delete;
  ~ClaimedSlots() {
    for (size_t i = 0; i < size(); ++i) at(i)->~T();
  }

  template <typename... Args>
  T* Claim(Args&&... args) {
    const size_t i = next_.fetch_add(1, std::memory_order_relaxed);
    if (i >= N) return nullptr;
    return new (storage_ + i * sizeof(T)) T{std::forward<Args>(args)...};
  }
  // The slots claimed (read once every claimer is done: the owner's destructor).
  size_t size() const { return std::min(next_.load(std::memory_order_relaxed), N); }
  T* at(size_t i) { return std::launder(reinterpret_cast<T*>(storage_ + i * sizeof(T))); }
  // Which slot holds `item` (N: none).
  size_t IndexOf(const T* item) const {
    const auto p = reinterpret_cast<uintptr_t>(item), first = reinterpret_cast<uintptr_t>(storage_);
    return p < first || p >= first + sizeof(storage_) ? N : (p - first) / sizeof(T);
  }

 private:
  std::atomic<size_t> next_{0};
  alignas(T) unsigned char storage_[N * sizeof(T)];
};

// One traced request's spans and contexts, until the last holder of its
// contexts lets go: then its ended spans are encoded, all at once, and handed
// to the exporter. A span writes its record in place here from its start (no
// record is moved), and its end only marks it ended (and when, among the
// others: spans go out in the order they ended, as an SDK's would): a batch's
// answers go out before any of its spans is encoded.
class TraceBuffer final : public SpanSink {
 public:
  // Contexts and span records held in place (a request uses two or three contexts and four records); a request
  // that hands out or records more (a long ensemble) allocates the rest.
  static constexpr size_t kContexts = 6;
  static constexpr size_t kRecords = 6;

  TraceBuffer(std::shared_ptr<TraceService> service, bool keep_records)
      : service_(std::move(service)), keep_(keep_records) {}
  // Every span has let go of its record (each holds a context): the slots' ended_ ranks are all written.
  ~TraceBuffer() override {
    MutexLock l(&mu_);
    if (ends_.load(std::memory_order_relaxed) > 0) Export();
  }

  // The request's own context: spans under it are children of `parent` (0: the root span is a root).
  static std::shared_ptr<const TraceParent> Root(const std::shared_ptr<TraceBuffer>& self, TraceId trace, SpanId parent,
                                                 std::string trace_state) {
    return self->InPlace(self, trace, parent, std::move(trace_state));
  }

  SpanRecord* Open() override {
    SpanRecord* slot = records_.Claim();
    return slot ? slot : new SpanRecord();
  }
  // A slot's record stays where it is (marked ended, or destroyed with the buffer); one of the rest is kept.
  void Close(SpanRecord* record) override {
    const uint32_t rank = ends_.fetch_add(1, std::memory_order_relaxed) + 1;
    if (const size_t i = records_.IndexOf(record); i < kRecords) {
      ended_[i] = rank;  // each slot's rank is written by its span's holder alone
      return;
    }
    std::unique_ptr<SpanRecord> owned(record);
    MutexLock l(&mu_);
    more_.emplace_back(rank, std::move(owned));
  }
  void Abandon(SpanRecord* record) override {
    if (records_.IndexOf(record) == kRecords) delete record;
  }
  void Record(SpanRecord&& span) override {
    SpanRecord* r = Open();
    *r = std::move(span);
    Close(r);
  }

  std::shared_ptr<const TraceParent> Child(const std::shared_ptr<const TraceParent>& from, SpanId span_id) override {
    auto child = InPlace(from, from->trace_id, span_id, from->trace_state);
    return child ? child : SpanSink::Child(from, span_id);
  }

 private:
  // A context in this buffer, owned by `owner`'s owners (the buffer's, through any of its contexts); null when
  // the buffer's are all taken.
  template <typename Owner>
  std::shared_ptr<const TraceParent> InPlace(const std::shared_ptr<Owner>& owner, TraceId trace, SpanId span,
                                             std::string trace_state) {
    TraceParent* c = contexts_.Claim(this, trace, span, std::move(trace_state));
    return c ? std::shared_ptr<const TraceParent>(owner, c) : nullptr;
  }
  // The ended spans, in the order they ended, encoded into the thread's own scratch (hot in its cache, no
  // allocation once grown; a huge trace's room is let go), to the exporter; and to the console when it keeps
  // this request.
  void Export() TSA_REQUIRES(mu_) {
    thread_local std::vector<std::pair<uint32_t, SpanRecord*>> ended;
    ended.clear();
    for (size_t i = 0; i < records_.size(); ++i) {
      if (ended_[i] != 0) ended.emplace_back(ended_[i], records_.at(i));
    }
    for (const auto& [rank, span] : more_) ended.emplace_back(rank, span.get());
    std::sort(ended.begin(), ended.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    thread_local std::string encoded;
    encoded.clear();
    const bool json = service_->config_.encoding == TraceConfig::Encoding::kJson;
    for (const auto& [rank, span] : ended) {
      if (json)
        AppendOtlpJsonSpan(&encoded, *span);
      else
        AppendOtlpProtobufSpan(&encoded, *span);
    }
    service_->Export(encoded, ended.size());
    if (encoded.capacity() > (64 << 10)) std::string().swap(encoded);
    if (keep_) {
      std::vector<SpanRecord> kept;
      kept.reserve(ended.size());
      for (const auto& [rank, span] : ended) kept.push_back(std::move(*span));
      service_->recent_.Keep(std::move(kept));
    }
    if (ended.capacity() > 64) std::vector<std::pair<uint32_t, SpanRecord*>>().swap(ended);
  }

  const std::shared_ptr<TraceService> service_;
  const bool keep_;  // the console keeps this request's spans
  ClaimedSlots<TraceParent, kContexts> contexts_;
  ClaimedSlots<SpanRecord, kRecords> records_;
  // ended_[i]: when record slot i's span ended (its rank among the ends, from 1; 0: not ended).
  std::atomic<uint32_t> ends_{0};
  uint32_t ended_[kRecords] = {};
  Mutex mu_;
  std::vector<std::pair<uint32_t, std::unique_ptr<SpanRecord>>> more_ TSA_GUARDED_BY(mu_);  // beyond the slots, ranked
};

Result<std::shared_ptr<TraceService>> TraceService::Create(const TraceConfig& config, Clock* clock) {
  auto address = ParseCollectorUrl(config.url);
  if (!address.ok()) return Status::InvalidArgument("--trace-config opentelemetry,url: " + address.status().message());
  OtlpResource resource;
  resource.attributes = config.resource;
  auto client = std::make_shared<OtlpHttpClient>(*address);
  const bool json = config.encoding == TraceConfig::Encoding::kJson;
  const auto timeout = config.export_timeout;
  SpanExporter::Send send = [client, resource, json, timeout](std::string_view spans, size_t) {
    // The batch's fragments go as they are, after a head written for them.
    if (json)
      return client->Post("application/json", {OtlpJsonHead(resource), OtlpJsonSpans(spans), kOtlpJsonTail}, timeout);
    return client->Post("application/x-protobuf", {OtlpProtobufHead(resource, spans.size()), spans}, timeout);
  };
  return CreateWithSender(config, std::move(send), clock);
}

std::shared_ptr<TraceService> TraceService::CreateWithSender(const TraceConfig& config, SpanExporter::Send send,
                                                             Clock* clock) {
  return std::shared_ptr<TraceService>(new TraceService(config, std::move(send), clock));
}

TraceService::TraceService(const TraceConfig& config, SpanExporter::Send send, Clock* clock)
    : config_(config), recent_(config.recent_traces, kRecentTracesPerSecond), count_left_(config.count) {
  SpanExporter::Options o;
  o.max_queue_size = config.max_queue_size;
  o.max_export_batch_size = config.max_export_batch_size;
  o.schedule_delay = config.schedule_delay;
  exporter_ = std::make_unique<SpanExporter>(o, std::move(send), clock);
}

TraceService::~TraceService() { exporter_->Stop(); }

bool TraceService::SampleByRate() {
  if (config_.rate == 0) return false;
  if (seen_.fetch_add(1, std::memory_order_relaxed) % config_.rate != 0) return false;
  if (config_.count < 0) return true;
  int64_t left = count_left_.load(std::memory_order_relaxed);
  while (left > 0) {
    if (count_left_.compare_exchange_weak(left, left - 1, std::memory_order_relaxed)) return true;
  }
  return false;
}

TraceService::Decision TraceService::Decide(std::string_view traceparent, std::string_view tracestate) {
  Decision d;
  if (!config_.enabled) return d;
  if (!traceparent.empty()) {
    auto remote = ParseTraceparent(traceparent);
    if (remote.ok()) {
      if (!remote->sampled) return d;  // the caller decided: not recorded
      propagated_.fetch_add(1, std::memory_order_relaxed);
      d.trace = remote->trace_id;
      d.parent = remote->parent_id;
      d.state = SanitizeTracestate(tracestate);
      return d;
    }
    invalid_.fetch_add(1, std::memory_order_relaxed);
  }
  if (!SampleByRate()) return d;
  by_rate_.fetch_add(1, std::memory_order_relaxed);
  d.trace = NewTraceId();
  return d;
}

Span TraceService::StartRequest(Decision&& d, std::string name, int64_t start_unix_ns) {
  if (!d.traced()) return Span();
  auto buffer = std::make_shared<TraceBuffer>(shared_from_this(), recent_.Claim(start_unix_ns));
  return Span(TraceBuffer::Root(buffer, d.trace, d.parent, std::move(d.state)), std::move(name), SpanKind::kServer,
              start_unix_ns);
}

TraceService::Counters TraceService::counters() const {
  Counters c;
  c.traces_by_rate = by_rate_.load(std::memory_order_relaxed);
  c.traces_propagated = propagated_.load(std::memory_order_relaxed);
  c.invalid_traceparent = invalid_.load(std::memory_order_relaxed);
  c.spans_recorded = recorded_.load(std::memory_order_relaxed);
  c.exporter = exporter_->counters();
  return c;
}

}  // namespace inferd::tracing
