// The gRPC side of tracing and the access log (docs/observability.md): a
// ModelInfer call (or one request of a ModelStreamInfer stream) opens its
// root span from the call's traceparent/tracestate metadata, returns its own
// traceparent in the initial metadata (unary calls), and writes its
// access-log line when answered.
#include "frontends/grpc/services.h"

namespace inferd::grpcfe {
std::shared_ptr<ObservedCall> ObserveCall(const ServiceContext& ctx, const CallView& c, const char* method,
                                          const google::protobuf::Message* request, std::string model,
                                          std::string version, std::string id) {
  if (ctx.observer == nullptr || !ctx.observer->active()) return nullptr;
  const tracing::RequestObserver& observer = *ctx.observer;
  const auto start = std::chrono::steady_clock::now();
  auto decision = observer.Decide(/*inference=*/true, c.Metadata("traceparent"), c.Metadata("tracestate"));
  if (!observer.Observes(decision)) return nullptr;  // not traced, no log: the call goes unobserved
  auto o = std::make_shared<ObservedCall>();
  o->observer = &observer;
  observer.Start(o->request, std::move(decision), start);
  tracing::AccessRecord& r = o->record;
  r.protocol = "grpc";
  r.method = method;
  r.target = std::string("/inference.GRPCInferenceService/") + method;
  r.model = std::move(model);
  r.version = std::move(version);
  r.request_id = std::move(id);
  if (observer.access_log() != nullptr) {
    r.client = c.Peer();
    if (request) r.bytes_in = request->ByteSizeLong();
  }
  return o;
}

void FinishObserved(ObservedCall& o, CallView* unary, const grpc::Status& status,
                    const google::protobuf::Message* response, const std::string& served_version) {
  if (unary != nullptr && !o.request.traceparent.empty())
    unary->AddInitialMetadata("traceparent", o.request.traceparent);
  tracing::AccessRecord& r = o.record;
  r.status = static_cast<int>(status.error_code());
  r.failed = !status.ok();
  if (!served_version.empty()) r.version = served_version;
  if (response && o.observer->access_log() != nullptr) r.bytes_out = response->ByteSizeLong();
  const Status error = status.ok() ? Status::OK() : Status(StatusCode::kInternal, status.error_message());
  o.observer->Finish(o.request, std::move(r), error);
}

}  // namespace inferd::grpcfe
