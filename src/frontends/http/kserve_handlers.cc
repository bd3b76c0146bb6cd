// KServe v2 REST routes: decode with the v2 codec, call the server facade,
// encode the result. See router.h for the route list.
#include <rapidjson/document.h>

#include <charconv>

#include "frontends/codec/json_tensor.h"
#include "frontends/codec/json_writer.h"
#include "frontends/codec/kserve_v2.h"
#include "frontends/http/router.h"
#include "server/load_parameters.h"

namespace inferd::http {
namespace {

void AppendDuration(std::string* b, const char* key, const DurationSnapshot& d) {
  json::AppendKey(b, key);
  b->append("{\"count\":");
  json::AppendNumber(b, d.count);
  b->append(",\"ns\":");
  json::AppendNumber(b, d.ns);
  b->push_back('}');
}

// inferd's extension of a model's statistics: adaptive batching's estimates
// and padding's counters (docs/batching.md).
void AppendBatchingStats(std::string* b, const BatchingSnapshot& s) {
  b->append(",\"batching\":{");
  bool first = true;
  auto num = [&](const char* name, double v) {
    if (!first) b->push_back(',');
    first = false;
    b->push_back('"');
    b->append(name);
    b->append("\":");
    json::AppendNumber(b, v);
  };
  if (s.adaptive) {
    b->append("\"mode\":\"adaptive\"");
    first = false;
    num("arrival_rows_per_s", s.arrival_rows_per_s);
    num("cost_fixed_us", s.cost_fixed_us);
    num("cost_per_row_us", s.cost_per_row_us);
    num("cost_per_position_us", s.cost_per_position_us);
    b->append(s.cost_fitted ? ",\"cost_fitted\":true" : ",\"cost_fitted\":false");
    num("cost_samples", static_cast<double>(s.cost_samples));
    num("waits", static_cast<double>(s.waits));
    num("wait_us_total", static_cast<double>(s.wait_us_total));
    num("cpu_utilization", s.cpu_utilization);
  }
  if (s.padding) {
    num("padded_elements", static_cast<double>(s.padded_elements));
    num("real_elements", static_cast<double>(s.real_elements));
  }
  b->push_back('}');
}

// parameter quantization "int8": what serves and why, sizes, errors, speed-up (docs/quantization.md).
void AppendQuantization(std::string* b, const QuantizationReport& q) {
  b->append(",\"quantization\":{\"requested\":");
  json::AppendEscaped(b, q.requested);
  b->append(",\"serving\":");
  json::AppendEscaped(b, q.serving);
  b->append(",\"reason\":");
  json::AppendEscaped(b, q.reason);
  b->append(",\"kernel\":");
  json::AppendEscaped(b, q.info.kernel);
  b->append(",\"layers\":");
  json::AppendNumber(b, q.info.layers);
  b->append(",\"weight_bytes_fp32\":");
  json::AppendNumber(b, q.info.float_bytes);
  b->append(",\"weight_bytes_int8\":");
  json::AppendNumber(b, q.info.quantized_bytes);
  b->append(",\"data\":");
  json::AppendEscaped(b, q.data);
  b->append(",\"rows\":");
  json::AppendNumber(b, q.rows);
  if (q.top1_agreement >= 0) {
    b->append(",\"top1_agreement\":");
    json::AppendNumber(b, q.top1_agreement);
  }
  if (q.relative_error >= 0) {
    b->append(",\"relative_error\":");
    json::AppendNumber(b, q.relative_error);
  }
  b->append(",\"speedup\":");
  json::AppendNumber(b, q.speedup);
  b->push_back('}');
}

std::string StatsJson(const std::vector<ModelStatsSnapshot>& stats) {
  std::string b = "{\"model_stats\":[";
  for (size_t i = 0; i < stats.size(); ++i) {
    const auto& s = stats[i];
    if (i) b.push_back(',');
    b.append("{\"name\":");
    json::AppendEscaped(&b, s.name);
    b.append(",\"version\":");
    json::AppendEscaped(&b, s.version);
    b.append(",\"last_inference\":");
    json::AppendNumber(&b, s.last_inference_ms);
    b.append(",\"inference_count\":");
    json::AppendNumber(&b, s.inference_count);
    b.append(",\"execution_count\":");
    json::AppendNumber(&b, s.execution_count);
    b.append(",\"inference_stats\":{");
    AppendDuration(&b, "success", s.success);
    b.push_back(',');
    AppendDuration(&b, "fail", s.fail);
    b.push_back(',');
    AppendDuration(&b, "queue", s.queue);
    b.push_back(',');
    AppendDuration(&b, "compute_input", s.compute_input);
    b.push_back(',');
    AppendDuration(&b, "compute_infer", s.compute_infer);
    b.push_back(',');
    AppendDuration(&b, "compute_output", s.compute_output);
    b.push_back(',');
    AppendDuration(&b, "cache_hit", s.cache_hit);
    b.push_back(',');
    AppendDuration(&b, "cache_miss", s.cache_miss);
    b.append("},\"batch_stats\":[");
    for (size_t k = 0; k < s.batch_stats.size(); ++k) {
      const auto& bs = s.batch_stats[k];
      if (k) b.push_back(',');
      b.append("{\"batch_size\":");
      json::AppendNumber(&b, bs.batch_size);
      b.push_back(',');
      AppendDuration(&b, "compute_input", {bs.count, bs.input_ns});
      b.push_back(',');
      AppendDuration(&b, "compute_infer", {bs.count, bs.infer_ns});
      b.push_back(',');
      AppendDuration(&b, "compute_output", {bs.count, bs.output_ns});
      b.push_back('}');
    }
    b.push_back(']');
    if (s.batching) AppendBatchingStats(&b, *s.batching);
    if (s.quantization) AppendQuantization(&b, *s.quantization);
    b.push_back('}');
  }
  b.append("]}");
  return b;
}

void AppendTensorMeta(std::string* b, const std::vector<TensorMetadata>& ts) {
  b->push_back('[');
  for (size_t i = 0; i < ts.size(); ++i) {
    if (i) b->push_back(',');
    b->append("{\"name\":");
    json::AppendEscaped(b, ts[i].name);
    b->append(",\"datatype\":\"");
    b->append(DataTypeToWire(ts[i].dtype));
    b->append("\",\"shape\":[");
    for (size_t k = 0; k < ts[i].shape.size(); ++k) {
      if (k) b->push_back(',');
      json::AppendNumber(b, ts[i].shape[k]);
    }
    b->append("]}");
  }
  b->push_back(']');
}

std::string MetadataJson(const ModelMetadata& md) {
  std::string b = "{\"name\":";
  json::AppendEscaped(&b, md.name);
  b.append(",\"versions\":");
  json::AppendStringArray(&b, md.versions);
  b.append(",\"platform\":");
  json::AppendEscaped(&b, md.platform);
  b.append(",\"inputs\":");
  AppendTensorMeta(&b, md.inputs);
  b.append(",\"outputs\":");
  AppendTensorMeta(&b, md.outputs);
  b.push_back('}');
  return b;
}

Response ServerMetadataResponse(const InferenceServer& server) {
  const ServerMetadata md = server.GetServerMetadata();
  std::string b = "{\"name\":";
  json::AppendEscaped(&b, md.name);
  b.append(",\"version\":");
  json::AppendEscaped(&b, md.version);
  b.append(",\"extensions\":");
  json::AppendStringArray(&b, md.extensions);
  b.push_back('}');
  return JsonResponse(200, std::move(b));
}

Result<bool> ReadyOnlyFlag(const Request& req) {
  if (!req.body || req.body->empty()) return false;
  rapidjson::Document doc;
  doc.Parse<json::kParseFlags>(req.body->data(), req.body->size());
  if (doc.HasParseError() || !doc.IsObject())
    return Status::InvalidArgument("repository index body must be a JSON object");
  auto it = doc.FindMember("ready");
  if (it == doc.MemberEnd()) return false;
  if (!it->value.IsBool()) return Status::InvalidArgument("'ready' must be a bool");
  return it->value.GetBool();
}

// The load body's "parameters" (the policy itself is server/load_parameters.h).
Result<std::optional<std::string>> LoadConfigParam(const Request& req) {
  if (!req.body || req.body->empty()) return std::optional<std::string>();
  rapidjson::Document doc;
  doc.Parse<json::kParseFlags>(req.body->data(), req.body->size());
  if (doc.HasParseError() || !doc.IsObject()) return Status::InvalidArgument("load body must be a JSON object");
  auto params = doc.FindMember("parameters");
  if (params == doc.MemberEnd()) return std::optional<std::string>();
  if (!params->value.IsObject()) return Status::InvalidArgument("'parameters' must be an object");
  std::vector<LoadParameter> list;
  for (const auto& m : params->value.GetObject()) {
    LoadParameter p{std::string(m.name.GetString(), m.name.GetStringLength()), m.value.IsString(), ""};
    if (p.is_string) p.string_value.assign(m.value.GetString(), m.value.GetStringLength());
    list.push_back(std::move(p));
  }
  return ConfigFromLoadParameters(list);
}

void Infer(InferenceServer* server, Request&& req, std::string model, std::string version, Responder respond) {
  // Under overload, refuse before decoding the body (the model keeps its CPU).
  if (Status st = server->Admit(model, version); !st.ok()) return respond(ErrorResponse(st));
  std::optional<size_t> header_length;
  if (const std::string* h = req.Header("inference-header-content-length")) {
    size_t v = 0;
    auto [p, ec] = std::from_chars(h->data(), h->data() + h->size(), v);
    if (ec != std::errc() || p != h->data() + h->size()) {
      return respond(ErrorResponse(Status::InvalidArgument("invalid Inference-Header-Content-Length '" + *h + "'")));
    }
    header_length = v;
  }
  auto parsed = v2::ParseInferRequest(req.body, header_length, model, version, server->front_end().json_limits);
  if (!parsed.ok()) {
    // An unknown model or version is the more useful answer than a body error.
    auto ready = server->IsModelReady(model, version);
    return respond(ErrorResponse(ready.ok() ? parsed.status() : ready.status()));
  }
  (*parsed)->cancellation = req.cancellation;
  if (const std::string* key = req.Header("inferd-sticky-key")) (*parsed)->sticky_key = *key;
  KeepWireForm(*server, req, **parsed);
  v2::OutputOptions opts = v2::OutputOptionsOf(**parsed);
  server->InferAsync(
      std::move(*parsed), [respond = std::move(respond), opts = std::move(opts)](Result<InferResponse> r) {
        if (!r.ok()) return respond(ErrorResponse(r.status()));
        if (r->relayed) return respond(RelayedResponse(*r->relayed, false));
        v2::EncodedResponse enc = v2::EncodeInferResponse(*r, opts);
        Response resp;
        resp.body = std::move(enc.body);
        if (enc.header_length) {
          resp.content_type = "application/octet-stream";
          resp.headers.emplace_back("Inference-Header-Content-Length", std::to_string(*enc.header_length));
        }
        // Which version answered: also in the body's model_version.
        respond(WithModelVersion(std::move(resp), r->model_version));
      });
}

}  // namespace

void HandleV2(InferenceServer* server, Request&& req, const std::vector<std::string>& parts, Responder respond) {
  const bool get = IsGet(req), post = req.method == "POST";
  const size_t n = parts.size();
  if (n == 1) return respond(get ? ServerMetadataResponse(*server) : MethodNotAllowed(req, kAllowGet));
  if (parts[1] == "health" && n == 3) {
    if (!get) return respond(MethodNotAllowed(req, kAllowGet));
    bool ok;
    if (parts[2] == "live")
      ok = server->IsLive();
    else if (parts[2] == "ready")
      ok = server->IsReady();
    else
      return respond(ErrorResponse(Status::NotFound("no route for " + req.path)));
    Response r;
    r.status = ok ? 200 : 400;
    r.content_type.clear();
    return respond(std::move(r));
  }
  if (parts[1] == "jobs" && HandleV2Jobs(server, req, parts, respond)) return;
  if (parts[1] == "cluster" && n == 2) {
    // Cluster mode: this node's view of the cluster (a management route).
    if (!get) return respond(MethodNotAllowed(req, kAllowGet));
    auto status = server->admin().ClusterStatus();
    return respond(status.ok() ? JsonResponse(200, std::move(*status)) : ErrorResponse(status.status()));
  }
  if (parts[1] == "repository") {
    if (HandleV2Lifecycle(server, req, parts, respond)) return;
    if (HandleV2Traffic(server, req, parts, respond)) return;
    if (!post) return respond(MethodNotAllowed(req, kAllowPost));
    if (n == 3 && parts[2] == "index") {
      auto ready = ReadyOnlyFlag(req);
      if (!ready.ok()) return respond(ErrorResponse(ready.status()));
      auto index = server->admin().RepositoryIndex(*ready);
      if (!index.ok()) return respond(ErrorResponse(index.status()));
      std::string b = "[";
      for (size_t i = 0; i < index->size(); ++i) {
        const auto& e = (*index)[i];
        if (i) b.push_back(',');
        b.append("{\"name\":");
        json::AppendEscaped(&b, e.name);
        if (!e.version.empty()) {
          b.append(",\"version\":");
          json::AppendEscaped(&b, e.version);
        }
        b.append(",\"state\":");
        json::AppendEscaped(&b, e.state);
        b.append(",\"reason\":");
        json::AppendEscaped(&b, e.reason);
        b.push_back('}');
      }
      b.push_back(']');
      return respond(JsonResponse(200, std::move(b)));
    }
    if (n == 5 && parts[2] == "models" && (parts[4] == "load" || parts[4] == "unload")) {
      std::optional<std::string> config;
      if (parts[4] == "load") {
        auto cfg = LoadConfigParam(req);
        if (!cfg.ok()) return respond(ErrorResponse(cfg.status()));
        config = std::move(*cfg);
      }
      // Loads block: they run on the server's admin thread, not on this one.
      server->admin().Run([server, load = parts[4] == "load", name = parts[3], config = std::move(config),
                           respond = std::move(respond)](bool cancelled) {
        const Status st = cancelled ? Status::Unavailable("the server is shutting down")
                          : load    ? server->admin().LoadModel(name, config)
                                    : server->admin().UnloadModel(name);
        respond(st.ok() ? JsonResponse(200, "{}") : ErrorResponse(st));
      });
      return;
    }
    return respond(ErrorResponse(Status::NotFound("no route for " + req.path)));
  }
  if (parts[1] != "models" || n < 3) return respond(ErrorResponse(Status::NotFound("no route for " + req.path)));
  if (n == 3 && parts[2] == "stats") {
    if (!get) return respond(MethodNotAllowed(req, kAllowGet));
    auto stats = server->GetStatistics("", "");
    return respond(stats.ok() ? JsonResponse(200, StatsJson(*stats)) : ErrorResponse(stats.status()));
  }
  const std::string& model = parts[2];
  std::string version;
  size_t i = 3;
  if (n >= 5 && parts[3] == "versions") {
    version = parts[4];
    i = 5;
  } else if (n >= 5 && parts[3] == "labels") {
    auto v = server->ResolveLabel(model, parts[4]);
    if (!v.ok()) return respond(ErrorResponse(v.status()));
    version = std::move(*v);
    i = 5;
  }
  if (n > i + 1) return respond(ErrorResponse(Status::NotFound("no route for " + req.path)));
  const std::string action = n == i ? "" : parts[i];
  if (action != "" && action != "infer" && action != "generate" && action != "generate_stream" && action != "ready" &&
      action != "config" && action != "stats") {
    return respond(ErrorResponse(Status::NotFound("no route for " + req.path)));
  }
  if (action == "infer") {
    if (!post) return respond(MethodNotAllowed(req, kAllowPost));
    return Infer(server, std::move(req), model, version, std::move(respond));
  }
  if (action == "generate" || action == "generate_stream") {
    if (!post) return respond(MethodNotAllowed(req, kAllowPost));
    return Generate(server, std::move(req), model, version, action == "generate_stream", std::move(respond));
  }
  if (!get) return respond(MethodNotAllowed(req, kAllowGet));
  if (action == "ready") {
    // Answered here in cluster mode too: a model another node holds is ready if this node can route to it.
    auto ready = server->IsModelReady(model, version);
    if (!ready.ok()) return respond(ErrorResponse(ready.status()));
    Response r;
    r.status = *ready ? 200 : 400;
    r.content_type.clear();
    return respond(std::move(r));
  }
  // Metadata, config and statistics: where a node other than this one holds the model (cluster mode), it
  // answers them; here, metadata and config wait for an on-demand model's load as /infer does.
  return RouteModelRead(server, req, model, /*wait_for_load=*/action != "stats", std::move(respond),
                        [server, model, version, action](Responder respond) {
                          if (action.empty()) {
                            auto md = server->GetModelMetadata(model, version);
                            return respond(md.ok() ? JsonResponse(200, MetadataJson(*md)) : ErrorResponse(md.status()));
                          }
                          if (action == "config") {
                            auto cfg = server->GetModelConfigJson(model, version);
                            return respond(cfg.ok() ? JsonResponse(200, *cfg) : ErrorResponse(cfg.status()));
                          }
                          auto stats = server->GetStatistics(model, version);  // "stats"
                          respond(stats.ok() ? JsonResponse(200, StatsJson(*stats)) : ErrorResponse(stats.status()));
                        });
}

}  // namespace inferd::http
