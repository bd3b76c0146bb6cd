// TF Serving v1 REST routes: model status, metadata and :predict.
#include "frontends/codec/json_writer.h"
#include "frontends/codec/tfserving_v1.h"
#include "frontends/http/router.h"

namespace inferd::http {
namespace {

const char* TfDtype(DataType dt) {
  switch (dt) {
    case DataType::kBool:
      return "DT_BOOL";
    case DataType::kUint8:
      return "DT_UINT8";
    case DataType::kUint16:
      return "DT_UINT16";
    case DataType::kUint32:
      return "DT_UINT32";
    case DataType::kUint64:
      return "DT_UINT64";
    case DataType::kInt8:
      return "DT_INT8";
    case DataType::kInt16:
      return "DT_INT16";
    case DataType::kInt32:
      return "DT_INT32";
    case DataType::kInt64:
      return "DT_INT64";
    case DataType::kFp16:
      return "DT_HALF";
    case DataType::kBf16:
      return "DT_BFLOAT16";
    case DataType::kFp32:
      return "DT_FLOAT";
    case DataType::kFp64:
      return "DT_DOUBLE";
    case DataType::kBytes:
      return "DT_STRING";
    case DataType::kInvalid:
      break;
  }
  return "DT_INVALID";
}

void AppendSignatureTensors(std::string* b, const std::vector<TensorMetadata>& ts) {
  b->push_back('{');
  for (size_t i = 0; i < ts.size(); ++i) {
    if (i) b->push_back(',');
    json::AppendKey(b, ts[i].name);
    b->append("{\"dtype\":\"");
    b->append(TfDtype(ts[i].dtype));
    b->append("\",\"tensor_shape\":{\"dim\":[");
    for (size_t k = 0; k < ts[i].shape.size(); ++k) {
      if (k) b->push_back(',');
      b->append("{\"size\":\"");
      json::AppendNumber(b, ts[i].shape[k]);
      b->append("\",\"name\":\"\"}");
    }
    b->append("],\"unknown_rank\":false},\"name\":");
    json::AppendEscaped(b, ts[i].name);
    b->push_back('}');
  }
  b->push_back('}');
}

std::string StatusJson(const ModelMetadata& md, const std::string& version) {
  std::string b = "{\"model_version_status\":[";
  bool first = true;
  for (const auto& v : md.versions) {
    if (!version.empty() && v != version) continue;
    if (!first) b.push_back(',');
    first = false;
    b.append("{\"version\":");
    json::AppendEscaped(&b, v);
    b.append(",\"state\":\"AVAILABLE\",\"status\":{\"error_code\":\"OK\",\"error_message\":\"\"}}");
  }
  b.append("]}");
  return b;
}

std::string V1MetadataJson(const ModelMetadata& md) {
  std::string b = "{\"model_spec\":{\"name\":";
  json::AppendEscaped(&b, md.name);
  b.append(",\"signature_name\":\"\",\"version\":");
  json::AppendEscaped(&b, md.resolved_version);
  b.append("},\"metadata\":{\"signature_def\":{\"signature_def\":{\"serving_default\":{\"inputs\":");
  AppendSignatureTensors(&b, md.inputs);
  b.append(",\"outputs\":");
  AppendSignatureTensors(&b, md.outputs);
  b.append(",\"method_name\":\"tensorflow/serving/predict\"}}}}}");
  return b;
}

// One trip into the server: the body's JSON is read here, its inputs are decoded by the pipeline on the version
// that serves the request (an on-demand model loads first, as for /infer).
void Predict(InferenceServer* server, const Request& req, const std::string& model, const std::string& version,
             Responder respond) {
  auto parsed = v1::ReadPredictRequest(req.body ? std::string_view(*req.body) : std::string_view(), model, version,
                                       server->front_end().json_limits);
  if (!parsed.ok()) return respond(ErrorResponse(UnlessUnknownModel(server, model, version, parsed.status())));
  parsed->request->cancellation = req.cancellation;
  if (const std::string* key = req.Header("inferd-sticky-key")) parsed->request->sticky_key = *key;
  KeepWireForm(*server, req, *parsed->request);
  const v1::Format format = parsed->format;
  server->InferAsync(std::move(parsed->request), [respond = std::move(respond), format](Result<InferResponse> r) {
    if (!r.ok()) return respond(ErrorResponse(r.status()));
    if (r->relayed) return respond(RelayedResponse(*r->relayed, false));
    auto body = v1::EncodePredictResponse(*r, format);
    respond(body.ok() ? WithModelVersion(JsonResponse(200, std::move(*body)), r->model_version)
                      : ErrorResponse(body.status()));
  });
}

}  // namespace

void HandleV1(InferenceServer* server, Request&& req, const std::vector<std::string>& parts_in, Responder respond) {
  std::vector<std::string> parts = parts_in;
  if (parts.size() < 3 || parts[1] != "models")
    return respond(ErrorResponse(Status::NotFound("no route for " + req.path)));
  std::string verb;
  if (auto colon = parts.back().rfind(':'); colon != std::string::npos) {
    verb = parts.back().substr(colon + 1);
    parts.back().resize(colon);
  }
  const std::string& model = parts[2];
  std::string version;
  size_t i = 3;
  if (parts.size() >= 5 && parts[3] == "versions") {
    version = parts[4];
    i = 5;
  } else if (parts.size() >= 5 && parts[3] == "labels") {
    auto v = server->ResolveLabel(model, parts[4]);
    if (!v.ok()) return respond(ErrorResponse(v.status()));
    version = std::move(*v);
    i = 5;
  }
  const std::string tail = parts.size() > i ? parts[i] : "";
  if (parts.size() > i + 1) return respond(ErrorResponse(Status::NotFound("no route for " + req.path)));

  if (!verb.empty()) {
    if (!tail.empty()) return respond(ErrorResponse(Status::NotFound("no route for " + req.path)));
    if (verb == "classify" || verb == "regress") {
      return respond(ErrorResponse(Status::Unimplemented(":" + verb + " is not supported; use :predict")));
    }
    if (verb != "predict") return respond(ErrorResponse(Status::NotFound("unknown method ':" + verb + "'")));
    if (req.method != "POST") return respond(MethodNotAllowed(req, kAllowPost));
    return Predict(server, req, model, version, std::move(respond));
  }
  if (!IsGet(req)) return respond(MethodNotAllowed(req, kAllowGet));
  if (!tail.empty() && tail != "metadata") return respond(ErrorResponse(Status::NotFound("no route for " + req.path)));
  // Where a node other than this one holds the model (cluster mode), it answers. The metadata waits for an
  // on-demand model's load as :predict does (the status route does not).
  RouteModelRead(server, req, model, /*wait_for_load=*/tail == "metadata", std::move(respond),
                 [server, model, version, tail](Responder respond) {
                   auto md = server->GetModelMetadata(model, version);
                   if (!md.ok()) return respond(ErrorResponse(md.status()));
                   respond(JsonResponse(200, tail == "metadata" ? V1MetadataJson(*md) : StatusJson(*md, version)));
                 });
}

}  // namespace inferd::http
