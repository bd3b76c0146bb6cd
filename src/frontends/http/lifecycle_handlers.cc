// Version labels and rollback over HTTP (inferd's repository extension):
//   GET    /v2/repository/models/{m}/labels            labels, default, history
//   PUT    /v2/repository/models/{m}/labels/{label}    body {"version": "3"} (POST too)
//   DELETE /v2/repository/models/{m}/labels/{label}
//   POST   /v2/repository/models/{m}/rollback          previous default becomes `stable`
//   GET    /v2/repository/models                       every model: state, versions, labels, memory
#include <rapidjson/document.h>

#include "frontends/codec/json_tensor.h"
#include "frontends/codec/json_writer.h"
#include "frontends/http/router.h"

namespace inferd::http {
namespace {

void AppendLabelPairs(std::string* b, const std::vector<std::pair<std::string, std::string>>& labels) {
  b->push_back('{');
  for (size_t i = 0; i < labels.size(); ++i) {
    if (i) b->push_back(',');
    json::AppendKey(b, labels[i].first);
    json::AppendEscaped(b, labels[i].second);
  }
  b->push_back('}');
}

Response ListingResponse(const ModelListing& l) {
  std::string b = "{\"residency\":";
  json::AppendEscaped(&b, l.residency);
  b.append(",\"memory_budget_bytes\":");
  json::AppendNumber(&b, l.budget_bytes);
  b.append(",\"resident_bytes\":");
  json::AppendNumber(&b, l.used_bytes);
  b.append(",\"models\":[");
  for (size_t i = 0; i < l.models.size(); ++i) {
    const auto& m = l.models[i];
    if (i) b.push_back(',');
    b.append("{\"name\":");
    json::AppendEscaped(&b, m.name);
    b.append(",\"state\":");
    json::AppendEscaped(&b, m.state);
    b.append(",\"reason\":");
    json::AppendEscaped(&b, m.reason);
    b.append(",\"backend\":");
    json::AppendEscaped(&b, m.backend);
    b.append(",\"default_version\":");
    json::AppendEscaped(&b, m.default_version);
    b.append(",\"resident_bytes\":");
    json::AppendNumber(&b, m.resident_bytes);
    b.append(",\"pinned\":");
    b.append(m.pinned ? "true" : "false");
    b.append(",\"idle_ms\":");
    json::AppendNumber(&b, m.idle_ms);
    b.append(",\"labels\":");
    AppendLabelPairs(&b, m.labels);
    b.append(",\"versions\":[");
    for (size_t j = 0; j < m.versions.size(); ++j) {
      const auto& v = m.versions[j];
      if (j) b.push_back(',');
      b.append("{\"version\":");
      json::AppendEscaped(&b, v.version);
      b.append(",\"state\":");
      json::AppendEscaped(&b, v.state);
      b.append(",\"reason\":");
      json::AppendEscaped(&b, v.reason);
      b.append(",\"resident_bytes\":");
      json::AppendNumber(&b, v.resident_bytes);
      b.append(",\"size_source\":");
      json::AppendEscaped(&b, v.size_source);
      b.append(",\"load_seconds\":");
      json::AppendNumber(&b, v.load_seconds);
      b.push_back('}');
    }
    b.push_back(']');
    if (m.rollout) {
      const auto& r = *m.rollout;
      b.append(",\"rollout\":{\"phase\":");
      json::AppendEscaped(&b, r.phase);
      b.append(",\"version\":");
      json::AppendEscaped(&b, r.version);
      b.append(",\"canary_percent\":");
      json::AppendNumber(&b, r.canary_percent);
      if (r.steps) {
        b.append(",\"step\":");
        json::AppendNumber(&b, r.step);
        b.append(",\"steps\":");
        json::AppendNumber(&b, r.steps);
      }
      b.append(",\"reason\":");
      json::AppendEscaped(&b, r.reason);
      b.push_back('}');
    }
    b.push_back('}');
  }
  b.append("]}");
  return JsonResponse(200, std::move(b));
}

void AppendLabelsFields(std::string* b, const LabelsInfo& info) {
  b->append("\"model\":");
  json::AppendEscaped(b, info.model);
  b->append(",\"default_version\":");
  json::AppendEscaped(b, info.default_version);
  b->append(",\"versions\":");
  json::AppendStringArray(b, info.serving_versions);
  b->append(",\"labels\":");
  AppendLabelPairs(b, info.labels);
  b->append(",\"history\":");
  json::AppendStringArray(b, info.history);
}

Response LabelsResponse(const Result<LabelsInfo>& info) {
  if (!info.ok()) return ErrorResponse(info.status());
  std::string b = "{";
  AppendLabelsFields(&b, *info);
  b.push_back('}');
  return JsonResponse(200, std::move(b));
}

Response RollbackResponse(const Result<RollbackResult>& r) {
  if (!r.ok()) return ErrorResponse(r.status());
  std::string b = "{";
  AppendLabelsFields(&b, r->labels);
  b.append(",\"rolled_back_from\":");
  json::AppendEscaped(&b, r->from_version);
  b.append(",\"rolled_back_to\":");
  json::AppendEscaped(&b, r->to_version);
  b.push_back('}');
  return JsonResponse(200, std::move(b));
}

// {"version": "3"} or {"version": 3}.
Result<std::string> VersionParam(const Request& req) {
  if (!req.body || req.body->empty()) return Status::InvalidArgument("body must be {\"version\": \"<n>\"}");
  rapidjson::Document doc;
  doc.Parse<json::kParseFlags>(req.body->data(), req.body->size());
  if (doc.HasParseError() || !doc.IsObject()) return Status::InvalidArgument("body must be a JSON object");
  auto v = doc.FindMember("version");
  if (v == doc.MemberEnd()) return Status::InvalidArgument("body needs \"version\"");
  if (v->value.IsString()) return std::string(v->value.GetString(), v->value.GetStringLength());
  if (v->value.IsInt64()) return std::to_string(v->value.GetInt64());
  return Status::InvalidArgument("\"version\" must be a string or an integer");
}

}  // namespace

// parts: v2 repository models [{m} (labels [{l}] | rollback)]. Returns
// false when the path is not one of these routes.
bool HandleV2Lifecycle(InferenceServer* server, const Request& req, const std::vector<std::string>& parts,
                       const Responder& respond) {
  const size_t n = parts.size();
  if (n < 3 || parts[1] != "repository" || parts[2] != "models") return false;
  if (n == 3) {
    respond(IsGet(req) ? ListingResponse(server->admin().ListModels()) : MethodNotAllowed(req, kAllowGet));
    return true;
  }
  if (n < 5) return false;
  const std::string& model = parts[3];
  auto not_allowed = [&](std::string_view allow) {
    respond(MethodNotAllowed(req, allow));
    return true;
  };
  if (n == 5 && parts[4] == "rollback") {
    if (req.method != "POST") return not_allowed(kAllowPost);
    // May load a version: runs on the server's admin thread.
    server->admin().Run([server, model, respond](bool cancelled) {
      if (cancelled) return respond(ErrorResponse(Status::Unavailable("the server is shutting down")));
      respond(RollbackResponse(server->admin().Rollback(model)));
    });
    return true;
  }
  if (parts[4] != "labels" || n > 6) return false;
  if (n == 5) {
    if (!IsGet(req)) return not_allowed(kAllowGet);
    respond(LabelsResponse(server->admin().GetLabels(model)));
    return true;
  }
  const std::string& label = parts[5];
  if (req.method == "PUT" || req.method == "POST" || req.method == "DELETE") {
    std::optional<std::string> version;  // none: DELETE
    if (req.method != "DELETE") {
      auto v = VersionParam(req);
      if (!v.ok()) {
        respond(ErrorResponse(v.status()));
        return true;
      }
      version = std::move(*v);
    }
    // Setting a label may load a version: runs on the server's admin thread.
    server->admin().Run([server, model, label, version = std::move(version), respond](bool cancelled) {
      if (cancelled) return respond(ErrorResponse(Status::Unavailable("the server is shutting down")));
      respond(LabelsResponse(version ? server->admin().SetLabel(model, label, *version)
                                     : server->admin().DeleteLabel(model, label)));
    });
    return true;
  }
  if (IsGet(req)) {
    auto v = server->ResolveLabel(model, label);
    if (!v.ok()) {
      respond(ErrorResponse(v.status()));
      return true;
    }
    std::string b = "{\"model\":";
    json::AppendEscaped(&b, model);
    b.append(",\"label\":");
    json::AppendEscaped(&b, label);
    b.append(",\"version\":");
    json::AppendEscaped(&b, *v);
    b.push_back('}');
    respond(JsonResponse(200, std::move(b)));
    return true;
  }
  return not_allowed("GET, HEAD, PUT, POST, DELETE");
}

}  // namespace inferd::http
