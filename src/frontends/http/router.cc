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

RouteAccess AccessOf(const std::vector<std::string>& parts) {
  using auth::Need;
  const size_t n = parts.size();
  if (n >= 2 && parts[0] == "v2") {
    if (parts[1] == "health") return {Need::kHealth, ""};
    if (parts[1] == "jobs") return {Need::kJobs, ""};
    if (parts[1] == "cluster") return {Need::kCluster, ""};
    if (parts[1] == "repository")
      return {Need::kModels, n >= 4 && parts[2] == "models" ? std::string_view(parts[3]) : std::string_view()};
    if (parts[1] == "models" && n >= 3 && !(n == 3 && parts[2] == "stats")) {
      // /v2/models/{m}[/versions/{v} | /labels/{l}][/action]
      const size_t i = n >= 5 && (parts[3] == "versions" || parts[3] == "labels") ? 5 : 3;
      const std::string_view action = n == i + 1 ? std::string_view(parts[i]) : std::string_view();
      const bool infer = action == "infer" || action == "generate" || action == "generate_stream";
      return {infer ? Need::kInfer : Need::kRead, parts[2]};
    }
    return {Need::kRead, ""};
  }
  if (n >= 2 && parts[0] == "v1") {
    if (parts[1] == "chat" || parts[1] == "completions" || parts[1] == "embeddings") return {Need::kInfer, "", true};
    if (n == 2 && (parts[1] == "load_lora_adapter" || parts[1] == "unload_lora_adapter"))
      return {Need::kModels, "", true};
    if (parts[1] == "models" && n == 2) return {Need::kRead, "", true};
    if (parts[1] == "models" && n >= 3) {
      // TF Serving: /v1/models/{m}[/...][:verb]; a verb (predict, classify, regress) is an inference.
      std::string_view model = parts[2];
      const size_t colon = parts.back().rfind(':');
      if (n == 3 && colon != std::string::npos) model = model.substr(0, colon);
      return {colon != std::string::npos ? Need::kInfer : Need::kRead, model};
    }
  }
  return {Need::kRead, ""};
}

Handler MakeApiHandler(InferenceServer* server, const tracing::RequestObserver* observer) {
  const auth::AccessPolicy* policy = server->front_end().access.get();
  Handler route = [server, policy](Request&& req, Responder respond) {
    std::vector<std::string> parts = SplitPath(req.path);
    if (policy->enabled()) {  // without tokens every route is open: nothing to look up
      const RouteAccess access = AccessOf(parts);
      const std::string* authorization = req.Header("authorization");
      if (Status st = policy->Check(authorization ? *authorization : std::string_view(), access.need, access.model);
          !st.ok()) {
        return respond(access.openai ? OpenAiError(st) : ErrorResponse(st));
      }
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
