// inferd.management.ManagementService: the gRPC form of the traffic and
// rollout routes (frontends/http/traffic_handlers.cc), over the same facade
// calls and JSON documents.
#include <utility>

#include "frontends/grpc/services.h"
#include "server/inference_server.h"

namespace inferd::grpcfe {
namespace {

grpc::ServerUnaryReactor* Answer(grpc::CallbackServerContext* c, const Result<std::string>& json,
                                 ManagementService::JsonAnswer* resp) {
  auto* reactor = c->DefaultReactor();
  if (!json.ok()) {
    reactor->Finish(ToGrpcStatus(json.status()));
  } else {
    resp->set_json(*json);
    reactor->Finish(grpc::Status::OK);
  }
  return reactor;
}

Result<std::string> TrafficJson(const Result<TrafficInfo>& info) {
  if (!info.ok()) return info.status();
  return info->json;
}

// Runs `call` (a state change that may load a version) on the admin thread
// and finishes the call with its answer.
template <typename Call>
grpc::ServerUnaryReactor* OnAdmin(ServiceContext* ctx, grpc::CallbackServerContext* c,
                                  ManagementService::JsonAnswer* resp, Call call) {
  auto* reactor = c->DefaultReactor();
  ctx->server->admin().Run([reactor, resp, call = std::move(call)](bool cancelled) {
    Result<std::string> json =
        cancelled ? Result<std::string>(Status::Unavailable("the server is shutting down")) : call();
    if (!json.ok()) return reactor->Finish(ToGrpcStatus(json.status()));
    resp->set_json(std::move(*json));
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

}  // namespace

grpc::ServerUnaryReactor* ManagementService::GetTraffic(grpc::CallbackServerContext* c, const ModelRequest* req,
                                                        JsonAnswer* resp) {
  if (Status st = AuthorizeCall(*ctx_, c, auth::Need::kModels, req->model_name()); !st.ok()) return Answer(c, st, resp);
  return Answer(c, TrafficJson(ctx_->server->admin().GetTraffic(req->model_name())), resp);
}

grpc::ServerUnaryReactor* ManagementService::SetTraffic(grpc::CallbackServerContext* c, const JsonRequest* req,
                                                        JsonAnswer* resp) {
  if (Status st = AuthorizeCall(*ctx_, c, auth::Need::kModels, req->model_name()); !st.ok()) return Answer(c, st, resp);
  return OnAdmin(ctx_, c, resp, [server = ctx_->server, model = req->model_name(), json = req->json()] {
    return TrafficJson(server->admin().SetTraffic(model, json));
  });
}

grpc::ServerUnaryReactor* ManagementService::ClearTraffic(grpc::CallbackServerContext* c, const ModelRequest* req,
                                                          JsonAnswer* resp) {
  if (Status st = AuthorizeCall(*ctx_, c, auth::Need::kModels, req->model_name()); !st.ok()) return Answer(c, st, resp);
  return OnAdmin(ctx_, c, resp, [server = ctx_->server, model = req->model_name()] {
    return TrafficJson(server->admin().ClearTraffic(model));
  });
}

grpc::ServerUnaryReactor* ManagementService::StartRollout(grpc::CallbackServerContext* c, const JsonRequest* req,
                                                          JsonAnswer* resp) {
  if (Status st = AuthorizeCall(*ctx_, c, auth::Need::kModels, req->model_name()); !st.ok()) return Answer(c, st, resp);
  return OnAdmin(ctx_, c, resp, [server = ctx_->server, model = req->model_name(), json = req->json()] {
    return server->admin().StartRollout(model, json);
  });
}

grpc::ServerUnaryReactor* ManagementService::GetRollout(grpc::CallbackServerContext* c, const ModelRequest* req,
                                                        JsonAnswer* resp) {
  if (Status st = AuthorizeCall(*ctx_, c, auth::Need::kModels, req->model_name()); !st.ok()) return Answer(c, st, resp);
  return Answer(c, ctx_->server->admin().GetRollout(req->model_name()), resp);
}

grpc::ServerUnaryReactor* ManagementService::AbortRollout(grpc::CallbackServerContext* c, const ModelRequest* req,
                                                          JsonAnswer* resp) {
  if (Status st = AuthorizeCall(*ctx_, c, auth::Need::kModels, req->model_name()); !st.ok()) return Answer(c, st, resp);
  return OnAdmin(ctx_, c, resp,
                 [server = ctx_->server, model = req->model_name()] { return server->admin().AbortRollout(model); });
}

}  // namespace inferd::grpcfe
