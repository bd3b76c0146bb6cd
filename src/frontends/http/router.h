// The HTTP routes of inferd: KServe v2 and TF Serving v1 on the API port,
// Prometheus on the metrics port. Routes translate and call the
// InferenceServer; they hold no request logic of their own.
//
// Routes (API port):
//   GET  /v2/health/live | /v2/health/ready
//   GET  /v2
//   GET  /v2/models/{m}[/versions/{v}]            metadata
//   GET  /v2/models/{m}[/versions/{v}]/ready
//   GET  /v2/models/{m}[/versions/{v}]/config
//   GET  /v2/models[/{m}[/versions/{v}]]/stats
//   POST /v2/models/{m}[/versions/{v}]/infer
//   POST /v2/models/{m}[/versions/{v}]/generate | /generate_stream   (Triton's generate extension)
//   POST /v2/repository/index
//   POST /v2/repository/models/{m}/load | /unload
//   GET  /v2/repository/models/{m}/labels; PUT|DELETE .../labels/{l}; POST .../rollback
//   /v2/models/{m}/labels/{l}/...                  as /versions/{v}/..., v = the label's version
//   GET  /v1/models/{m}[/versions/{v}|/labels/{l}]            TF Serving status
//   GET  /v1/models/{m}[/versions/{v}|/labels/{l}]/metadata
//   POST /v1/models/{m}[/versions/{v}|/labels/{l}]:predict
//   POST /v1/chat/completions | /v1/completions; GET /v1/models   (OpenAI-compatible; openai_handlers.cc)
// Metrics port: GET /metrics
//
// Thread-safety: the returned handlers are thread-safe. `server` is not
// owned and must outlive them.
#pragma once

#include "frontends/http/http_types.h"
#include "server/inference_server.h"
#include "tracing/request_observer.h"

namespace inferd::http {

// With tracing or the access log on (`observer` active: not owned, outlives the handler), the API handler runs
// each request inside ObserveRequest (observe.cc): its root span, the traceparent header of the answer, its
// access-log line. Null or inactive: the routes alone.
Handler MakeApiHandler(InferenceServer* server, const tracing::RequestObserver* observer = nullptr);
void ObserveRequest(const tracing::RequestObserver& observer, Request&& req, Responder respond, const Handler& route);
Handler MakeMetricsHandler(const InferenceServer* server);

// Handlers per protocol (router.cc dispatches to them).
void HandleV2(InferenceServer* server, Request&& req, const std::vector<std::string>& parts, Responder respond);
// Labels and rollback under /v2/repository/models/{m}/; false if not such a path.
bool HandleV2Lifecycle(InferenceServer* server, const Request& req, const std::vector<std::string>& parts,
                       const Responder& respond);
// Traffic policies under /v2/repository/models/{m}/traffic; false if not such a path.
bool HandleV2Traffic(InferenceServer* server, const Request& req, const std::vector<std::string>& parts,
                     const Responder& respond);
// Batch jobs under /v2/jobs; false if not such a path.
bool HandleV2Jobs(InferenceServer* server, const Request& req, const std::vector<std::string>& parts,
                  const Responder& respond);
// An error in OpenAI's shape ({"error": {"message", "type", ...}}) with its HTTP status.
Response OpenAiError(const Status& st);
// The OpenAI routes; false (and `respond` untouched) if `parts` is not one of them.
bool HandleOpenAi(InferenceServer* server, Request&& req, const std::vector<std::string>& parts, Responder& respond);
// POST /v1/load_lora_adapter (`load`) or /v1/unload_lora_adapter: vLLM's bodies and answers (lora_handlers.cc).
void HandleLoraAdmin(InferenceServer* server, Request&& req, bool load, Responder respond);
void HandleV1(InferenceServer* server, Request&& req, const std::vector<std::string>& parts, Responder respond);
// POST .../generate (one JSON answer) and .../generate_stream (server-sent events).
void Generate(InferenceServer* server, Request&& req, const std::string& model, const std::string& version, bool stream,
              Responder respond);

// What a route needs of the caller's token (auth/access_policy.h) and the
// model its path names ("" for none; the OpenAI routes name theirs in the
// body and check it there). Unknown paths need `read` (a caller without a
// token learns nothing of the routes).
struct RouteAccess {
  auth::Need need = auth::Need::kRead;
  std::string_view model;  // a view into the parts AccessOf was given
  bool openai = false;     // an OpenAI route: refusals in OpenAI's error shape
};
RouteAccess AccessOf(const std::vector<std::string>& parts);
RouteAccess AccessOf(std::vector<std::string>&& parts) = delete;  // the model would dangle

// Splits "/a/b/c" into {"a","b","c"} with %XX decoding.
std::vector<std::string> SplitPath(const std::string& path);

Response JsonResponse(int status, std::string body);
// `r` with the `Inferd-Model-Version` header naming the version that answered
// (a traffic split may have picked it; docs/rollout.md): every inference
// answer carries it, on every protocol. Unchanged when `version` is empty.
Response WithModelVersion(Response r, const std::string& version);
// A body the front end could not read, for a model (version) that does not exist: the lookup's error (404), as
// when the model is looked up before the body; otherwise `body_error`. Only on the error path.
Status UnlessUnknownModel(InferenceServer* server, const std::string& model, const std::string& version,
                          Status body_error);

// What an inference request keeps of its transport: its trace (InferRequest::trace, when traced), and in cluster
// mode (forwarding.cc) its wire form (its method, target, end-to-end headers and body, InferRequest::wire) so that
// the forward stage can send it unchanged to the node holding the model, and the node that forwarded it here
// (such a request is served here).
void KeepWireForm(InferenceServer& server, const Request& req, InferRequest& r);
// The wire form alone (null on a single node and for a request a peer forwarded here).
std::shared_ptr<const WireRequest> WireFormOf(InferenceServer& server, const Request& req);
// A request about `model` that is not an inference (metadata, config, statistics, TF Serving's status): `here`
// answers it on this node (after the model's load with `wait_for_load`; a failed load is answered for it), or, in
// cluster mode, the node that holds the model does and its answer is relayed (InferenceServer::RouteModelRead).
void RouteModelRead(InferenceServer* server, const Request& req, const std::string& model, bool wait_for_load,
                    Responder respond, std::function<void(Responder)> here);
// A peer's answer (or one part of a streamed one, `more` set on all but the last) as this node's response.
Response RelayedResponse(const RelayedAnswer& a, bool more);

}  // namespace inferd::http
