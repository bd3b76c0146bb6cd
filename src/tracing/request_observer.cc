#include "tracing/request_observer.h"

#include "tracing/trace_context.h"

namespace inferd::tracing {

TraceService::Decision RequestObserver::Decide(bool inference, std::string_view traceparent,
                                               std::string_view tracestate) const {
  if (!traces_ || !inference) return {};
  return traces_->Decide(traceparent, tracestate);
}

void RequestObserver::Start(ObservedRequest& r, TraceService::Decision&& d, TimePoint start) const {
  r.start = start;
  r.start_unix_ns = UnixNanos(start);
  if (!d.traced()) return;
  r.root = traces_->StartRequest(std::move(d), "InferRequest", r.start_unix_ns);
  r.context = r.root.AsParent();
  r.traceparent = FormatTraceparent(r.root.trace_id(), r.root.id(), true);
}

void RequestObserver::Finish(ObservedRequest& request, AccessRecord&& record, const Status& error) const {
  Finish(request, std::move(record), error, std::chrono::steady_clock::now());
}

void RequestObserver::Finish(ObservedRequest& request, AccessRecord&& record, const Status& error,
                             TimePoint end) const {
  const int64_t end_unix_ns = request.start_unix_ns + (end - request.start).count();
  if (request.root.active()) {
    Span& s = request.root;
    // The record's strings go into the span when no log line needs them (the usual case when tracing).
    const bool keep = log_ != nullptr;
    auto text = [keep](std::string& v) { return keep ? v : std::move(v); };
    const bool grpc = record.protocol == "grpc";
    s.SetAttribute("inferd.protocol", text(record.protocol));
    if (grpc) {
      s.SetAttribute("rpc.system", std::string("grpc"));
      s.SetAttribute("rpc.method", text(record.method));
      s.SetAttribute("rpc.grpc.status_code", static_cast<int64_t>(record.status));
    } else {
      s.SetAttribute("http.request.method", text(record.method));
      s.SetAttribute("url.path", text(record.target));
      s.SetAttribute("http.response.status_code", static_cast<int64_t>(record.status));
    }
    if (!record.model.empty()) s.SetAttribute("triton.model_name", text(record.model));
    if (!record.version.empty()) s.SetAttribute("triton.model_version", text(record.version));
    if (!record.request_id.empty()) s.SetAttribute("triton.request_id", text(record.request_id));
    if (!record.client.empty()) s.SetAttribute("client.address", text(record.client));
    if (log_) record.trace_id = HexTraceId(s.trace_id());
    s.End(end_unix_ns, error);
  }
  if (log_ && log_->Wanted(record.failed)) {
    record.unix_ns = request.start_unix_ns;
    record.latency_ms = static_cast<double>((end - request.start).count()) / 1e6;
    log_->Write(record);
  }
}

}  // namespace inferd::tracing
