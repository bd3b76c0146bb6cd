#include "tracing/trace_service.h"

#include "core/mutex.h"
#include "tracing/otlp_encoder.h"
#include "tracing/otlp_http.h"
#include "tracing/trace_context.h"

namespace inferd::tracing {
namespace {

// One traced request's spans, until the last holder of its context lets go.
class TraceBuffer final : public SpanSink {
 public:
  explicit TraceBuffer(std::shared_ptr<TraceService> service) : service_(std::move(service)) { spans_.reserve(8); }
  ~TraceBuffer() override {
    MutexLock l(&mu_);
    if (!spans_.empty()) service_->RecordAll(std::move(spans_));
  }
  void Record(SpanRecord span) override {
    MutexLock l(&mu_);
    spans_.push_back(std::move(span));
  }

 private:
  const std::shared_ptr<TraceService> service_;
  Mutex mu_;
  std::vector<SpanRecord> spans_ TSA_GUARDED_BY(mu_);
};

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
  SpanExporter::Send send = [client, resource, json, timeout](const std::vector<SpanRecord>& batch) {
    if (json) return client->Post("application/json", EncodeOtlpJson(resource, batch), timeout);
    return client->Post("application/x-protobuf", EncodeOtlpProtobuf(resource, batch), timeout);
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
  if (!traceparent.empty()) {
    auto remote = ParseTraceparent(traceparent);
    if (remote.ok()) {
      if (!remote->sampled) return Span();  // the caller decided: not recorded
      propagated_.fetch_add(1, std::memory_order_relaxed);
      return Span(std::make_shared<TraceBuffer>(shared_from_this()), remote->trace_id, remote->parent_id,
                  SanitizeTracestate(tracestate), std::move(name), SpanKind::kServer, start_unix_ns);
    }
    invalid_.fetch_add(1, std::memory_order_relaxed);
  }
  if (!SampleByRate()) return Span();
  by_rate_.fetch_add(1, std::memory_order_relaxed);
  return Span(std::make_shared<TraceBuffer>(shared_from_this()), NewTraceId(), 0, std::string(), std::move(name),
              SpanKind::kServer, start_unix_ns);
}

void TraceService::Record(SpanRecord span) {
  recorded_.fetch_add(1, std::memory_order_relaxed);
  exporter_->Add(std::move(span));
}

void TraceService::RecordAll(std::vector<SpanRecord> spans) {
  recorded_.fetch_add(spans.size(), std::memory_order_relaxed);
  if (!spans.empty()) recent_.Offer(spans, spans.back().end_unix_ns);
  exporter_->AddAll(std::move(spans));
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
