// Traffic policies over HTTP (inferd's repository extension):
//   GET    /v2/repository/models/{m}/traffic   the policy and its source (runtime, config, none)
//   PUT    /v2/repository/models/{m}/traffic   body: the policy ({"split": {...}, "sticky_key": ..., "shadow": {...}})
//   DELETE /v2/repository/models/{m}/traffic   drop the run-time policy (the config's applies again)
//   POST   /v2/repository/models/{m}/rollout   start a progressive rollout (body: server/rollout_controller.h)
//   GET    /v2/repository/models/{m}/rollout   its state and history
//   DELETE /v2/repository/models/{m}/rollout   abort it (the canary gets 0%)
#include "frontends/http/router.h"

namespace inferd::http {
namespace {

Response TrafficResponse(const Result<TrafficInfo>& info) {
  if (!info.ok()) return ErrorResponse(info.status());
  return JsonResponse(200, info->json);
}

}  // namespace

namespace {

Response RolloutResponse(const Result<std::string>& state) {
  if (!state.ok()) return ErrorResponse(state.status());
  return JsonResponse(200, *state);
}

void HandleRollout(InferenceServer* server, const Request& req, const std::string& model, const Responder& respond) {
  if (IsGet(req)) return respond(RolloutResponse(server->admin().GetRollout(model)));
  if (req.method == "POST" || req.method == "PUT") {
    std::string body = req.body ? std::string(*req.body) : std::string();
    // Starting loads the version: the server's admin thread.
    return server->admin().Run([server, model, body = std::move(body), respond](bool cancelled) {
      if (cancelled) return respond(ErrorResponse(Status::Unavailable("the server is shutting down")));
      respond(RolloutResponse(server->admin().StartRollout(model, body)));
    });
  }
  if (req.method == "DELETE") {
    return server->admin().Run([server, model, respond](bool cancelled) {
      if (cancelled) return respond(ErrorResponse(Status::Unavailable("the server is shutting down")));
      respond(RolloutResponse(server->admin().AbortRollout(model)));
    });
  }
  respond(MethodNotAllowed(req, "GET, HEAD, POST, PUT, DELETE"));
}

}  // namespace

bool HandleV2Traffic(InferenceServer* server, const Request& req, const std::vector<std::string>& parts,
                     const Responder& respond) {
  if (parts.size() != 5 || parts[1] != "repository" || parts[2] != "models") return false;
  const std::string& model = parts[3];
  if (parts[4] == "rollout") {
    HandleRollout(server, req, model, respond);
    return true;
  }
  if (parts[4] != "traffic") return false;
  if (IsGet(req)) {
    respond(TrafficResponse(server->admin().GetTraffic(model)));
  } else if (req.method == "PUT" || req.method == "POST") {
    std::string body = req.body ? std::string(*req.body) : std::string();
    server->admin().Run([server, model, body = std::move(body), respond](bool cancelled) {
      if (cancelled) return respond(ErrorResponse(Status::Unavailable("the server is shutting down")));
      respond(TrafficResponse(server->admin().SetTraffic(model, body)));
    });
  } else if (req.method == "DELETE") {
    server->admin().Run([server, model, respond](bool cancelled) {
      if (cancelled) return respond(ErrorResponse(Status::Unavailable("the server is shutting down")));
      respond(TrafficResponse(server->admin().ClearTraffic(model)));
    });
  } else {
    respond(MethodNotAllowed(req, "GET, HEAD, PUT, POST, DELETE"));
  }
  return true;
}

}  // namespace inferd::http
