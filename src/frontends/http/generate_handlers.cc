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

namespace {

void GenerateResident(InferenceServer* server, Request&& req, const std::string& model, const std::string& version,
                      bool stream, Responder respond) {
  if (Status st = server->Admit(model, version); !st.ok()) return respond(ErrorResponse(st));
  auto md = server->GetModelMetadata(model, version);
  if (!md.ok()) return respond(ErrorResponse(md.status()));
  std::vector<generate::InputInfo> inputs;
  for (const auto& t : md->inputs) inputs.push_back({t.name, t.dtype, t.shape});
  auto parsed = generate::ParseGenerateRequest(req.body ? std::string_view(*req.body) : std::string_view(), inputs,
                                               model, md->resolved_version);
  if (!parsed.ok()) return respond(ErrorResponse(parsed.status()));
  (*parsed)->cancellation = req.cancellation;
  // Parsed with the default version's inputs; an unaddressed request still
  // goes through the model's traffic policy.
  (*parsed)->model_version = version;
  if (const std::string* key = req.Header("inferd-sticky-key")) (*parsed)->sticky_key = *key;
  if (!stream) {
    return server->InferAsync(std::move(*parsed), [respond = std::move(respond)](Result<InferResponse> r) {
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
    respond(
        WithModelVersion(ServerSentEvent(generate::EncodeGenerateResponse(part), /*more=*/true), part.model_version));
    return !(cancellation && cancellation->cancelled());
  };
  sink.final = [respond = std::move(respond), parts](Result<InferResponse> r) {
    const bool begun = parts->load(std::memory_order_relaxed) > 0;
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

}  // namespace

void Generate(InferenceServer* server, Request&& req, const std::string& model, const std::string& version, bool stream,
              Responder respond) {
  // The request is parsed with the model's metadata: an on-demand model loads first, as for /infer.
  server->WhenResident(model, [server, req = std::move(req), model, version, stream,
                               respond = std::move(respond)](const Status& st) mutable {
    if (!st.ok()) return respond(ErrorResponse(st));
    GenerateResident(server, std::move(req), model, version, stream, std::move(respond));
  });
}

}  // namespace inferd::http
