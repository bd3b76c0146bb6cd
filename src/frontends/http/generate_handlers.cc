// Triton's generate extension: POST /v2/models/{m}[/versions/{v}]/generate
// answers one JSON object; .../generate_stream answers server-sent events,
// one `data: {...}` event per partial response (token streaming, decoupled
// models) and one for a final answer that carries outputs. An error before
// the first event is an ordinary HTTP error; after it, an event
// `data: {"error": "..."}` ends the stream (the status line is already sent).
#include <atomic>

#include "frontends/codec/generate.h"
#include "frontends/codec/kserve_v2.h"
#include "frontends/http/router.h"

namespace inferd::http {

// One trip into the server: the body's JSON is read here, its inputs are decoded by the pipeline on the version
// that serves the request (an on-demand model loads first, as for /infer).
void Generate(InferenceServer* server, Request&& req, const std::string& model, const std::string& version, bool stream,
              Responder respond) {
  auto parsed = generate::ReadGenerateRequest(req.body ? std::string_view(*req.body) : std::string_view(), model,
                                              version, server->front_end().json_limits);
  if (!parsed.ok()) return respond(ErrorResponse(UnlessUnknownModel(server, model, version, parsed.status())));
  (*parsed)->cancellation = req.cancellation;
  if (const std::string* key = req.Header("inferd-sticky-key")) (*parsed)->sticky_key = *key;
  KeepWireForm(*server, req, **parsed);
  if (!stream) {
    return server->InferAsync(std::move(*parsed), [respond = std::move(respond)](Result<InferResponse> r) {
      if (r.ok() && r->relayed) return respond(RelayedResponse(*r->relayed, false));
      respond(r.ok() ? WithModelVersion(JsonResponse(200, generate::EncodeGenerateResponse(*r)), r->model_version)
                     : ErrorResponse(r.status()));
    });
  }
  // Parts and the final answer come in order (ResponseSink's contract); the
  // count tells the final answer whether the stream has begun.
  auto parts = std::make_shared<std::atomic<size_t>>(0);
  ResponseSink sink;
  sink.partial = [respond, parts, cancellation = req.cancellation](InferResponse part) {
    parts->fetch_add(1, std::memory_order_relaxed);
    if (part.relayed) {
      respond(RelayedResponse(*part.relayed, /*more=*/true));
      return !(cancellation && cancellation->cancelled());
    }
    respond(
        WithModelVersion(ServerSentEvent(generate::EncodeGenerateResponse(part), /*more=*/true), part.model_version));
    return !(cancellation && cancellation->cancelled());
  };
  sink.final = [respond = std::move(respond), parts](Result<InferResponse> r) {
    const bool begun = parts->load(std::memory_order_relaxed) > 0;
    if (r.ok() && r->relayed) return respond(RelayedResponse(*r->relayed, /*more=*/false));
    if (!r.ok()) {
      if (!begun) return respond(ErrorResponse(r.status()));
      return respond(ServerSentEvent(v2::EncodeError(r.status().message()), /*more=*/false));
    }
    if (begun && r->outputs.empty()) {  // the parts were the answer: end the stream
      Response end;
      end.content_type = std::string(kEventStreamType);
      return respond(std::move(end));
    }
    respond(WithModelVersion(ServerSentEvent(generate::EncodeGenerateResponse(*r), /*more=*/false), r->model_version));
  };
  server->InferAsync(std::move(*parsed), std::move(sink));
}

}  // namespace inferd::http
