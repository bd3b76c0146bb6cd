// Version labels and rollback over HTTP (inferd's repository extension):
//   GET    /v2/repository/models/{m}/labels            labels, default, history
//   PUT    /v2/repository/models/{m}/labels/{label}    body {"version": "3"} (POST too)
//   DELETE /v2/repository/models/{m}/labels/{label}
//   POST   /v2/repository/models/{m}/rollback          previous default becomes `stable`
#include <rapidjson/document.h>

#include "frontends/codec/json_writer.h"
#include "frontends/http/router.h"

namespace inferd::http {
namespace {

void AppendLabelsFields(std::string* b, const LabelsInfo& info) {
  b->append("\"model\":");
  json::AppendEscaped(b, info.model);
  b->append(",\"default_version\":");
  json::AppendEscaped(b, info.default_version);
  b->append(",\"versions\":");
  json::AppendStringArray(b, info.serving_versions);
  b->append(",\"labels\":{");
  for (size_t i = 0; i < info.labels.size(); ++i) {
    if (i) b->push_back(',');
    json::AppendEscaped(b, info.labels[i].first);
    b->push_back(':');
    json::AppendEscaped(b, info.labels[i].second);
  }
  b->append("},\"history\":");
  json::AppendStringArray(b, info.history);
}

Response LabelsResponse(const Result<LabelsInfo>& info) {
  if (!info.ok()) return ErrorResponse(info.status());
  std::string b = "{";
  AppendLabelsFields(&b, *info);
  b.push_back('}');
  return JsonResponse(200, std::move(b));
}

// {"version": "3"} or {"version": 3}.
Result<std::string> VersionParam(const Request& req) {
  if (!req.body || req.body->empty()) return Status::InvalidArgument("body must be {\"version\": \"<n>\"}");
  rapidjson::Document doc;
  doc.Parse(req.body->data(), req.body->size());
  if (doc.HasParseError() || !doc.IsObject()) return Status::InvalidArgument("body must be a JSON object");
  auto v = doc.FindMember("version");
  if (v == doc.MemberEnd()) return Status::InvalidArgument("body needs \"version\"");
  if (v->value.IsString()) return std::string(v->value.GetString(), v->value.GetStringLength());
  if (v->value.IsInt64()) return std::to_string(v->value.GetInt64());
  return Status::InvalidArgument("\"version\" must be a string or an integer");
}

}  // namespace

// parts: v2 repository models {m} (labels [{l}] | rollback). Returns false
// when the path is not one of these routes.
bool HandleV2Lifecycle(InferenceServer* server, const Request& req, const std::vector<std::string>& parts,
                       const Responder& respond) {
  const size_t n = parts.size();
  if (n < 5 || parts[1] != "repository" || parts[2] != "models") return false;
  const std::string& model = parts[3];
  auto not_allowed = [&] {
    respond(MethodNotAllowed(req));
    return true;
  };
  if (n == 5 && parts[4] == "rollback") {
    if (req.method != "POST") return not_allowed();
    auto r = server->Rollback(model);
    if (!r.ok()) {
      respond(ErrorResponse(r.status()));
      return true;
    }
    std::string b = "{";
    AppendLabelsFields(&b, r->labels);
    b.append(",\"rolled_back_from\":");
    json::AppendEscaped(&b, r->from_version);
    b.append(",\"rolled_back_to\":");
    json::AppendEscaped(&b, r->to_version);
    b.push_back('}');
    respond(JsonResponse(200, std::move(b)));
    return true;
  }
  if (parts[4] != "labels" || n > 6) return false;
  if (n == 5) {
    if (req.method != "GET") return not_allowed();
    respond(LabelsResponse(server->GetLabels(model)));
    return true;
  }
  const std::string& label = parts[5];
  if (req.method == "PUT" || req.method == "POST") {
    auto version = VersionParam(req);
    respond(version.ok() ? LabelsResponse(server->SetLabel(model, label, *version)) : ErrorResponse(version.status()));
    return true;
  }
  if (req.method == "DELETE") {
    respond(LabelsResponse(server->DeleteLabel(model, label)));
    return true;
  }
  if (req.method == "GET") {
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
  return not_allowed();
}

}  // namespace inferd::http
