#include "cluster/node_record.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>

namespace inferd::cluster {
namespace {

bool IsIdChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
         c == '-' || c == ':';
}

Status Bad(const std::string& what) { return Status::InvalidArgument("node record: " + what); }

Result<std::string> String(const rapidjson::Value& o, const char* key, bool required, size_t max_bytes) {
  auto it = o.FindMember(key);
  if (it == o.MemberEnd()) {
    if (required) return Bad(std::string("'") + key + "' is missing");
    return std::string();
  }
  if (!it->value.IsString()) return Bad(std::string("'") + key + "' must be a string");
  if (it->value.GetStringLength() > max_bytes) return Bad(std::string("'") + key + "' is too long");
  return std::string(it->value.GetString(), it->value.GetStringLength());
}

Result<uint64_t> Unsigned(const rapidjson::Value& o, const char* key) {
  auto it = o.FindMember(key);
  if (it == o.MemberEnd()) return uint64_t{0};
  if (!it->value.IsUint64()) return Bad(std::string("'") + key + "' must be a non-negative integer");
  return it->value.GetUint64();
}

}  // namespace

Status CheckNodeId(std::string_view id) {
  if (id.empty() || id.size() > kMaxNodeIdBytes)
    return Status::InvalidArgument("a node id has 1 to " + std::to_string(kMaxNodeIdBytes) + " characters");
  if (!std::all_of(id.begin(), id.end(), IsIdChar))
    return Status::InvalidArgument("node id '" + std::string(id) + "': only letters, digits and . _ - : are allowed");
  return Status::OK();
}

std::string EncodeNodeRecord(const NodeRecord& r) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  w.StartObject();
  w.Key("id");
  w.String(r.id.c_str(), static_cast<rapidjson::SizeType>(r.id.size()));
  w.Key("http");
  w.String(r.http_address.c_str(), static_cast<rapidjson::SizeType>(r.http_address.size()));
  if (!r.grpc_address.empty()) {
    w.Key("grpc");
    w.String(r.grpc_address.c_str(), static_cast<rapidjson::SizeType>(r.grpc_address.size()));
  }
  w.Key("budget_bytes");
  w.Uint64(r.budget_bytes);
  w.Key("used_bytes");
  w.Uint64(r.used_bytes);
  w.Key("in_flight");
  w.Uint64(static_cast<uint64_t>(std::max<int64_t>(0, r.in_flight)));
  w.Key("started_unix_ms");
  w.Uint64(static_cast<uint64_t>(std::max<int64_t>(0, r.started_unix_ms)));
  w.Key("models");
  w.StartArray();
  for (const std::string& m : r.models) w.String(m.c_str(), static_cast<rapidjson::SizeType>(m.size()));
  w.EndArray();
  if (!r.rates.empty()) {
    w.Key("rates");
    w.StartObject();
    for (const auto& [m, rate] : r.rates) {
      w.Key(m.c_str(), static_cast<rapidjson::SizeType>(m.size()));
      w.Uint64(rate);
    }
    w.EndObject();
  }
  w.EndObject();
  return std::string(buf.GetString(), buf.GetSize());
}

Result<NodeRecord> ParseNodeRecord(std::string_view json) {
  if (json.size() > kMaxNodeRecordBytes) return Bad("larger than " + std::to_string(kMaxNodeRecordBytes) + " bytes");
  rapidjson::Document doc;
  doc.Parse<rapidjson::kParseStopWhenDoneFlag>(json.data(), json.size());
  if (doc.HasParseError()) return Bad("not JSON");
  if (!doc.IsObject()) return Bad("not a JSON object");
  NodeRecord r;
  auto id = String(doc, "id", true, kMaxNodeIdBytes);
  if (!id.ok()) return id.status();
  if (Status st = CheckNodeId(*id); !st.ok()) return Bad(st.message());
  r.id = std::move(*id);
  auto http = String(doc, "http", true, 512);
  if (!http.ok()) return http.status();
  if (http->empty()) return Bad("'http' is empty");
  r.http_address = std::move(*http);
  auto grpc = String(doc, "grpc", false, 512);
  if (!grpc.ok()) return grpc.status();
  r.grpc_address = std::move(*grpc);
  auto budget = Unsigned(doc, "budget_bytes");
  auto used = Unsigned(doc, "used_bytes");
  auto in_flight = Unsigned(doc, "in_flight");
  auto started = Unsigned(doc, "started_unix_ms");
  for (const auto* v : {&budget, &used, &in_flight, &started})
    if (!v->ok()) return v->status();
  if (*in_flight > static_cast<uint64_t>(INT64_MAX) || *started > static_cast<uint64_t>(INT64_MAX))
    return Bad("a count is out of range");
  r.budget_bytes = *budget;
  r.used_bytes = *used;
  r.in_flight = static_cast<int64_t>(*in_flight);
  r.started_unix_ms = static_cast<int64_t>(*started);
  if (doc.HasMember("models")) {
    const rapidjson::Value& models = doc["models"];
    if (!models.IsArray()) return Bad("'models' must be an array of names");
    if (models.Size() > kMaxNodeRecordModels) return Bad("too many models");
    r.models.reserve(models.Size());
    for (const auto& m : models.GetArray()) {
      if (!m.IsString() || m.GetStringLength() == 0) return Bad("'models' must be an array of names");
      r.models.emplace_back(m.GetString(), m.GetStringLength());
    }
    std::sort(r.models.begin(), r.models.end());
    r.models.erase(std::unique(r.models.begin(), r.models.end()), r.models.end());
  }
  if (doc.HasMember("rates")) {
    const rapidjson::Value& rates = doc["rates"];
    if (!rates.IsObject()) return Bad("'rates' must be an object of model names to requests per second");
    if (rates.MemberCount() > kMaxNodeRecordModels) return Bad("too many rates");
    for (const auto& m : rates.GetObject()) {
      if (m.name.GetStringLength() == 0) return Bad("'rates' has an empty model name");
      if (!m.value.IsUint64() || m.value.GetUint64() > kMaxNodeRecordRate)
        return Bad("'rates' values are requests per second, 0 to " + std::to_string(kMaxNodeRecordRate));
      r.rates[std::string(m.name.GetString(), m.name.GetStringLength())] = m.value.GetUint64();
    }
  }
  return r;
}

}  // namespace inferd::cluster
