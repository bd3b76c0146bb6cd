#include "tracing/trace_service.h"

#include "core/mutex.h"
#include "tracing/otlp_encoder.h"
#include "tracing/otlp_http.h"
#include "tracing/trace_context.h"

namespace inferd::tracing {

// One traced request's spans (encoded as they end) and contexts, until the
// last holder of its contexts lets go.
class TraceBuffer final : public SpanSink {
 public:
  // Contexts held in place; a request that hands out more (a long ensemble) allocates the rest.
  static constexpr size_t kContexts = 6;

  TraceBuffer(std::shared_ptr<TraceService> service, bool keep_records) : service_(std::move(service)) {
    encoded_.reserve(json() ? 2048 : 1024);
    if (keep_records) kept_ = std::make_unique<std::vector<SpanRecord>>();
  }
  ~TraceBuffer() override {
    MutexLock l(&mu_);
    if (count_ != 0) service_->Export(encoded_, count_);
    if (kept_ && !kept_->empty()) service_->recent_.Keep(std::move(*kept_));
  }

  // The request's own context: spans under it are children of `parent` (0: the root span is a root).
  static std::shared_ptr<const TraceParent> Root(const std::shared_ptr<TraceBuffer>& self, TraceId trace, SpanId parent,
                                                 std::string trace_state) {
    return self->InPlace(self, trace, parent, std::move(trace_state));
  }

  void Record(const SpanRecord& span) override {
    MutexLock l(&mu_);
    if (json())
      AppendOtlpJsonSpan(&encoded_, span);
    else
      AppendOtlpProtobufSpan(&encoded_, span);
    ++count_;
    if (kept_) kept_->push_back(span);
  }

  std::shared_ptr<const TraceParent> Child(const std::shared_ptr<const TraceParent>& from, SpanId span_id) override {
    auto child = InPlace(from, from->trace_id, span_id, from->trace_state);
    return child ? child : SpanSink::Child(from, span_id);
  }

 private:
  bool json() const { return service_->config_.encoding == TraceConfig::Encoding::kJson; }

  // A context in this buffer, owned by `owner`'s owners (the buffer's, through any of its contexts); null when
  // the buffer's are all taken.
  template <typename Owner>
  std::shared_ptr<const TraceParent> InPlace(const std::shared_ptr<Owner>& owner, TraceId trace, SpanId span,
                                             std::string trace_state) {
    const size_t i = used_.fetch_add(1, std::memory_order_relaxed);
    if (i >= kContexts) return nullptr;
    contexts_[i] = TraceParent{this, trace, span, std::move(trace_state)};
    return std::shared_ptr<const TraceParent>(owner, &contexts_[i]);
  }

  const std::shared_ptr<TraceService> service_;
  std::atomic<size_t> used_{0};
  std::array<TraceParent, kContexts> contexts_;  // each written once, before it is handed out
  Mutex mu_;
  std::string encoded_ TSA_GUARDED_BY(mu_);
  size_t count_ TSA_GUARDED_BY(mu_) = 0;
  std::unique_ptr<std::vector<SpanRecord>> kept_ TSA_GUARDED_BY(mu_);  // null unless kept for the console
};

namespace {

// The console's share of the traced requests: a page of the last ones needs no more.
constexpr uint32_t kRecentTracesPerSecond = 10;

}  // namespace

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

Span TraceService::StartRequest(std::string_view traceparent, std::string_view tracestate, std::string name,
                                int64_t start_unix_ns) {
  if (!config_.enabled) return Span();
  TraceId trace;
  SpanId parent = 0;
  std::string state;
  if (!traceparent.empty()) {
    auto remote = ParseTraceparent(traceparent);
    if (remote.ok()) {
      if (!remote->sampled) return Span();  // the caller decided: not recorded
      propagated_.fetch_add(1, std::memory_order_relaxed);
      trace = remote->trace_id;
      parent = remote->parent_id;
      state = SanitizeTracestate(tracestate);
    } else {
      invalid_.fetch_add(1, std::memory_order_relaxed);
    }
  }
  if (!trace.valid()) {
    if (!SampleByRate()) return Span();
    by_rate_.fetch_add(1, std::memory_order_relaxed);
    trace = NewTraceId();
  }
  auto buffer = std::make_shared<TraceBuffer>(shared_from_this(), recent_.Claim(start_unix_ns));
  return Span(TraceBuffer::Root(buffer, trace, parent, std::move(state)), std::move(name), SpanKind::kServer,
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
