#include "frontends/http/router.h"

#include "core/percent_decoding.h"

namespace inferd::http {

std::vector<std::string> SplitPath(const std::string& path) {
  std::vector<std::string> parts;
  std::string_view rest(path);
  while (!rest.empty()) {
    const size_t slash = rest.find('/');
    if (const std::string_view segment = rest.substr(0, slash); !segment.empty()) {
      AppendPercentDecoded(&parts.emplace_back(), segment, /*plus_is_space=*/false);  // "%2F" stays in its segment
    }
    if (slash == std::string_view::npos) break;
    rest.remove_prefix(slash + 1);
  }
  return parts;
}

Response ServerSentEvent(std::string_view payload, bool more) {
  Response r;
  r.content_type = std::string(kEventStreamType);
  r.headers.emplace_back("Cache-Control", "no-cache");
  r.body.reserve(payload.size() + 8);
  r.body.append("data: ").append(payload).append("\n\n");
  r.more = more;
  return r;
}

Response WithModelVersion(Response r, const std::string& version) {
  if (!version.empty()) r.headers.emplace_back("Inferd-Model-Version", version);
  return r;
}

Status UnlessUnknownModel(InferenceServer* server, const std::string& model, const std::string& version,
                          Status body_error) {
  auto ready = server->IsModelReady(model, version);
  return ready.ok() || ready.status().code() != StatusCode::kNotFound ? body_error : ready.status();
}

Response JsonResponse(int status, std::string body) {
  Response r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

Handler MakeApiHandler(InferenceServer* server, const tracing::RequestObserver* observer) {
  Handler route = [server](Request&& req, Responder respond) {
    std::vector<std::string> parts = SplitPath(req.path);
    // Management routes: the model repository extension (/v2/repository/...), batch jobs (/v2/jobs...) and
    // the cluster's status (/v2/cluster).
    const bool management = parts.size() >= 2 && parts[0] == "v2" &&
                            (parts[1] == "repository" || parts[1] == "jobs" || parts[1] == "cluster");
    const std::string* authorization = req.Header("authorization");
    if (Status st = server->Authorize(authorization ? *authorization : std::string_view(), management); !st.ok()) {
      return respond(ErrorResponse(st));
    }
    if (!parts.empty() && parts[0] == "v2") return HandleV2(server, std::move(req), parts, std::move(respond));
    if (HandleOpenAi(server, std::move(req), parts, respond)) return;
    if (!parts.empty() && parts[0] == "v1") return HandleV1(server, std::move(req), parts, std::move(respond));
    respond(ErrorResponse(Status::NotFound("no route for " + req.method + " " + req.path)));
  };
  if (observer == nullptr || !observer->active()) return route;
  return [observer, route = std::move(route)](Request&& req, Responder respond) {
    ObserveRequest(*observer, std::move(req), std::move(respond), route);
  };
}

Handler MakeMetricsHandler(const InferenceServer* server) {
  return [server](Request&& req, Responder respond) {
    if (req.path != "/metrics")
      return respond(ErrorResponse(Status::NotFound("no route for " + req.path + " (try /metrics)")));
    if (!IsGet(req)) return respond(MethodNotAllowed(req, kAllowGet));
    PrometheusWriter w;
    server->WriteMetrics(w);
    Response r;
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
    r.body = w.Take();
    respond(std::move(r));
  };
}

}  // namespace inferd::http
