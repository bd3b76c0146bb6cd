// The gRPC side of tracing and the access log (docs/observability.md): a
// ModelInfer call (or one request of a ModelStreamInfer stream) opens its
// root span from the call's traceparent/tracestate metadata, returns its own
// traceparent in the initial metadata (unary calls), and writes its
// access-log line when answered.
#include "frontends/grpc/services.h"

namespace inferd::grpcfe {
namespace {

std::string_view Metadata(const grpc::CallbackServerContext* c, std::string_view key) {
  const auto& md = c->client_metadata();
  auto it = md.find(grpc::string_ref(key.data(), key.size()));
  return it == md.end() ? std::string_view() : std::string_view(it->second.data(), it->second.size());
}

// "ipv4:127.0.0.1:5000" -> "127.0.0.1:5000"; "ipv6:[::1]:5000" -> "[::1]:5000".
std::string PeerAddress(const grpc::CallbackServerContext* c) {
  std::string peer = c->peer();
  for (std::string_view prefix : {"ipv4:", "ipv6:"}) {
    if (peer.compare(0, prefix.size(), prefix) == 0) return peer.substr(prefix.size());
  }
  return peer;
}

}  // namespace

std::shared_ptr<ObservedCall> ObserveCall(const ServiceContext& ctx, const grpc::CallbackServerContext* c,
                                          const char* method, const google::protobuf::Message* request,
                                          std::string model, std::string version, std::string id) {
  if (ctx.observer == nullptr || !ctx.observer->active()) return nullptr;
  const tracing::RequestObserver& observer = *ctx.observer;
  const auto start = std::chrono::steady_clock::now();
  auto decision = observer.Decide(/*inference=*/true, Metadata(c, "traceparent"), Metadata(c, "tracestate"));
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
    r.client = PeerAddress(c);
    if (request) r.bytes_in = request->ByteSizeLong();
  }
  return o;
}

void FinishObserved(ObservedCall& o, grpc::CallbackServerContext* unary, const grpc::Status& status,
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
