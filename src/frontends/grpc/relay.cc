// Cluster mode's gRPC side of forwarding: a request's wire form kept for the
// forward stage, and a peer's relayed answer turned back into the call's.
#include <string_view>

#include "frontends/grpc/grpc_forwarder.h"
#include "frontends/grpc/services.h"
#include "server/inference_server.h"

namespace inferd::grpcfe {
namespace {

// Metadata gRPC sets itself, or that names this hop: never passed on.
bool IsHopMetadata(std::string_view key) {
  return key.empty() || key.front() == ':' || key.substr(0, 5) == "grpc-" || key == "user-agent" || key == "te" ||
         key == "content-type" || key == "host" || key == "inferd-forwarded-by" || key == kClientAddressMetadata;
}

}  // namespace

std::shared_ptr<const WireRequest> GrpcWireForm(const ServiceContext& ctx, const CallView& c,
                                                const google::protobuf::Message& req, const char* method,
                                                std::string* forwarded_by) {
  if (!ctx.server->admin().clustered()) return nullptr;
  bool forwarded = false;
  c.ForEachMetadata([&](std::string_view key, std::string_view value) {
    if (key != "inferd-forwarded-by") return;
    forwarded = true;
    if (forwarded_by) *forwarded_by = value.empty() ? "?" : std::string(value);
  });
  if (forwarded) return nullptr;  // served here: never forwarded again
  auto wire = std::make_shared<WireRequest>();
  wire->protocol = WireRequest::Protocol::kGrpc;
  wire->target = method;
  wire->deadline = c.Deadline();  // the holder stops where the client stops waiting
  c.ForEachMetadata([&](std::string_view key, std::string_view value) {
    if (!IsHopMetadata(key)) wire->headers.emplace_back(std::string(key), std::string(value));
  });
  auto body = std::make_shared<std::string>();
  req.SerializeToString(body.get());
  wire->body = std::move(body);
  return wire;
}

std::optional<grpc::Status> RelayedFailure(const RelayedAnswer& a) {
  int code = 0;
  std::string message;
  for (const auto& [name, value] : a.headers) {
    if (name == "grpc-status") code = std::atoi(value.c_str());
    if (name == "grpc-message") message = value;
  }
  if (code == 0) return std::nullopt;
  return grpc::Status(static_cast<grpc::StatusCode>(code), message);
}

grpc::Status RelayUnary(const RelayedAnswer& a, CallView* c, google::protobuf::Message* response) {
  for (const auto& [name, value] : a.headers)
    if (name == kServedByHeader) c->AddInitialMetadata("inferd-served-by", value);
  if (auto failed = RelayedFailure(a)) return *failed;
  if (!response->ParseFromString(a.body))
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the answer of the node that served it could not be read");
  return grpc::Status::OK;
}

void RouteModelRead(const ServiceContext& ctx, grpc::CallbackServerContext* c, grpc::ServerUnaryReactor* reactor,
                    const google::protobuf::Message& request, const char* method, const std::string& model,
                    bool wait_for_load, google::protobuf::Message* response, std::function<void()> here) {
  ctx.server->RouteModelRead(
      model, GrpcWireForm(ctx, LibraryCall(c), request, method, nullptr), wait_for_load,
      [reactor, here = std::move(here)](const Status& st) {
        if (!st.ok()) return reactor->Finish(ToGrpcStatus(st));
        here();
      },
      [c, reactor, response](Result<InferResponse> r) {
        if (!r.ok()) return reactor->Finish(ToGrpcStatus(r.status()));
        if (!r->relayed) {
          return reactor->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "the node that served it sent no answer"));
        }
        LibraryCall call(c);
        reactor->Finish(RelayUnary(*r->relayed, &call, response));
      });
}

}  // namespace inferd::grpcfe
