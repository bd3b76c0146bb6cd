#include "jobs/job_spec.h"

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <set>

namespace inferd::jobs {
namespace {

Status Bad(const std::string& field, const std::string& why) {
  return Status::InvalidArgument("job spec: '" + field + "' " + why);
}

Result<StoreType> ParseStoreType(std::string_view s, const std::string& field) {
  if (s == "csv") return StoreType::kCsv;
  if (s == "jsonl") return StoreType::kJsonl;
  if (s == "sqlite") return StoreType::kSqlite;
  if (s == "postgres") return StoreType::kPostgres;
  if (s == "redis") return StoreType::kRedis;
  return Bad(field, "must be one of csv, jsonl, sqlite, postgres, redis, not '" + std::string(s) + "'");
}

Result<std::string> String(const rapidjson::Value& obj, const char* member, const std::string& field,
                           size_t max_bytes = kMaxNameBytes) {
  auto it = obj.FindMember(member);
  if (it == obj.MemberEnd()) return std::string();
  if (!it->value.IsString()) return Bad(field, "must be a string");
  std::string s(it->value.GetString(), it->value.GetStringLength());
  if (s.size() > max_bytes) return Bad(field, "is longer than " + std::to_string(max_bytes) + " bytes");
  if (s.find('\0') != std::string::npos) return Bad(field, "contains a NUL byte");
  return s;
}

Result<int64_t> Integer(const rapidjson::Value& obj, const char* member, int64_t fallback, int64_t lo, int64_t hi) {
  auto it = obj.FindMember(member);
  if (it == obj.MemberEnd()) return fallback;
  if (!it->value.IsInt64()) return Bad(member, "must be an integer");
  const int64_t v = it->value.GetInt64();
  if (v < lo || v > hi) return Bad(member, "must be in " + std::to_string(lo) + ".." + std::to_string(hi));
  return v;
}

Status CheckMembers(const rapidjson::Value& obj, const std::set<std::string_view>& known, const std::string& where) {
  for (auto m = obj.MemberBegin(); m != obj.MemberEnd(); ++m) {
    std::string_view name(m->name.GetString(), m->name.GetStringLength());
    if (!known.count(name))
      return Bad(where.empty() ? std::string(name) : where + "." + std::string(name), "is not a known field");
  }
  return Status::OK();
}

// A column or tensor name: non-empty, no control characters.
Status CheckName(const std::string& s, const std::string& field) {
  if (s.empty()) return Bad(field, "must not be empty");
  for (unsigned char c : s)
    if (c < 0x20 || c == 0x7f) return Bad(field, "contains a control character");
  return Status::OK();
}

Result<SourceSpec> ParseSource(const rapidjson::Value& v) {
  if (!v.IsObject()) return Bad("source", "must be an object");
  INFERD_RETURN_IF_ERROR(CheckMembers(v, {"type", "path", "connection", "query"}, "source"));
  SourceSpec s;
  INFERD_ASSIGN_OR_RETURN(std::string type, String(v, "type", "source.type"));
  if (type.empty()) return Bad("source.type", "is required");
  INFERD_ASSIGN_OR_RETURN(s.type, ParseStoreType(type, "source.type"));
  INFERD_ASSIGN_OR_RETURN(s.path, String(v, "path", "source.path", 4096));
  INFERD_ASSIGN_OR_RETURN(s.connection, String(v, "connection", "source.connection"));
  INFERD_ASSIGN_OR_RETURN(s.query, String(v, "query", "source.query", kMaxQueryBytes));
  switch (s.type) {
    case StoreType::kCsv:
    case StoreType::kJsonl:
      if (s.path.empty()) return Bad("source.path", "is required for a " + type + " source");
      if (!s.connection.empty() || !s.query.empty())
        return Bad("source", "of type " + type + " takes a path only (no connection or query)");
      break;
    case StoreType::kSqlite:
      if (s.path.empty() == s.connection.empty())
        return Bad("source", "of type sqlite takes a path or a connection (one)");
      if (s.query.empty()) return Bad("source.query", "is required for an sqlite source");
      break;
    case StoreType::kPostgres:
      if (s.connection.empty()) return Bad("source.connection", "is required for a postgres source");
      if (!s.path.empty()) return Bad("source.path", "does not apply to a postgres source");
      if (s.query.empty()) return Bad("source.query", "is required for a postgres source");
      break;
    case StoreType::kRedis:
      return Bad("source.type", "redis is a sink only (a source is csv, jsonl, sqlite or postgres)");
  }
  return s;
}

Result<SinkSpec> ParseSink(const rapidjson::Value& v) {
  if (!v.IsObject()) return Bad("sink", "must be an object");
  INFERD_RETURN_IF_ERROR(CheckMembers(v, {"type", "path", "connection", "table"}, "sink"));
  SinkSpec s;
  INFERD_ASSIGN_OR_RETURN(std::string type, String(v, "type", "sink.type"));
  if (type.empty()) return Bad("sink.type", "is required");
  INFERD_ASSIGN_OR_RETURN(s.type, ParseStoreType(type, "sink.type"));
  INFERD_ASSIGN_OR_RETURN(s.path, String(v, "path", "sink.path", 4096));
  INFERD_ASSIGN_OR_RETURN(s.connection, String(v, "connection", "sink.connection"));
  INFERD_ASSIGN_OR_RETURN(s.table, String(v, "table", "sink.table"));
  switch (s.type) {
    case StoreType::kCsv:
    case StoreType::kJsonl:
      if (s.path.empty()) return Bad("sink.path", "is required for a " + type + " sink");
      if (!s.connection.empty() || !s.table.empty())
        return Bad("sink", "of type " + type + " takes a path only (no connection or table)");
      break;
    case StoreType::kSqlite:
    case StoreType::kPostgres:
    case StoreType::kRedis:
      if (s.type == StoreType::kSqlite && s.path.empty() == s.connection.empty())
        return Bad("sink", "of type sqlite takes a path or a connection (one)");
      if (s.type != StoreType::kSqlite && (s.connection.empty() || !s.path.empty()))
        return Bad("sink.connection", "is required for a " + type + " sink (and path does not apply)");
      if (s.table.empty()) return Bad("sink.table", "is required for a " + type + " sink");
      if (!IsSqlIdentifier(s.table))
        return Bad("sink.table", "must be letters, digits and '_' (not first), at most 63 bytes");
      break;
  }
  return s;
}

Result<std::vector<InputMapping>> ParseInputs(const rapidjson::Value& v) {
  if (!v.IsObject() || v.MemberCount() == 0) return Bad("inputs", "must be an object naming at least one input tensor");
  std::vector<InputMapping> out;
  std::set<std::string> tensors;
  size_t columns = 0;
  for (auto m = v.MemberBegin(); m != v.MemberEnd(); ++m) {
    InputMapping im;
    im.tensor.assign(m->name.GetString(), m->name.GetStringLength());
    const std::string field = "inputs." + im.tensor;
    INFERD_RETURN_IF_ERROR(CheckName(im.tensor, "inputs"));
    if (im.tensor.size() > kMaxNameBytes) return Bad("inputs", "names a tensor longer than 256 bytes");
    if (!tensors.insert(im.tensor).second) return Bad(field, "is given twice");
    auto add = [&](const rapidjson::Value& c) -> Status {
      if (!c.IsString()) return Bad(field, "must be a column name or an array of column names");
      std::string col(c.GetString(), c.GetStringLength());
      INFERD_RETURN_IF_ERROR(CheckName(col, field));
      if (col.size() > kMaxNameBytes) return Bad(field, "names a column longer than 256 bytes");
      if (++columns > kMaxMappedColumns) return Bad("inputs", "maps more than 65536 columns");
      im.columns.push_back(std::move(col));
      return Status::OK();
    };
    if (m->value.IsArray()) {
      if (m->value.Empty()) return Bad(field, "must name at least one column");
      for (const auto& c : m->value.GetArray()) INFERD_RETURN_IF_ERROR(add(c));
    } else {
      INFERD_RETURN_IF_ERROR(add(m->value));
    }
    out.push_back(std::move(im));
  }
  return out;
}

void WriteString(rapidjson::Writer<rapidjson::StringBuffer>& w, const std::string& s) {
  w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
}

}  // namespace

std::string_view StoreTypeName(StoreType t) {
  switch (t) {
    case StoreType::kCsv:
      return "csv";
    case StoreType::kJsonl:
      return "jsonl";
    case StoreType::kSqlite:
      return "sqlite";
    case StoreType::kPostgres:
      return "postgres";
    case StoreType::kRedis:
      return "redis";
  }
  return "?";
}

bool IsSqlIdentifier(std::string_view name) {
  if (name.empty() || name.size() > 63) return false;
  if (name[0] >= '0' && name[0] <= '9') return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    if (!ok) return false;
  }
  return true;
}

Result<JobSpec> ParseJobSpec(std::string_view json) {
  if (json.size() > kMaxSpecBytes) return Bad("(body)", "is larger than 1 MiB");
  rapidjson::Document doc;
  doc.Parse<rapidjson::kParseStopWhenDoneFlag>(json.data(), json.size());
  if (doc.HasParseError()) {
    return Status::InvalidArgument(std::string("job spec: malformed JSON at offset ") +
                                   std::to_string(doc.GetErrorOffset()) + ": " +
                                   rapidjson::GetParseError_En(doc.GetParseError()));
  }
  if (!doc.IsObject()) return Status::InvalidArgument("job spec: must be a JSON object");
  INFERD_RETURN_IF_ERROR(CheckMembers(doc,
                                      {"model", "version", "source", "sink", "key", "inputs", "outputs",
                                       "rows_per_request", "max_in_flight", "commit_rows", "max_row_errors"},
                                      ""));
  JobSpec s;
  INFERD_ASSIGN_OR_RETURN(s.model, String(doc, "model", "model"));
  if (s.model.empty()) return Bad("model", "is required");
  INFERD_ASSIGN_OR_RETURN(s.version, String(doc, "version", "version"));
  auto src = doc.FindMember("source");
  if (src == doc.MemberEnd()) return Bad("source", "is required");
  INFERD_ASSIGN_OR_RETURN(s.source, ParseSource(src->value));
  auto sink = doc.FindMember("sink");
  if (sink == doc.MemberEnd()) return Bad("sink", "is required");
  INFERD_ASSIGN_OR_RETURN(s.sink, ParseSink(sink->value));
  INFERD_ASSIGN_OR_RETURN(s.key, String(doc, "key", "key"));
  if (s.key.empty()) return Bad("key", "is required (the source column that names each row)");
  INFERD_RETURN_IF_ERROR(CheckName(s.key, "key"));
  auto inputs = doc.FindMember("inputs");
  if (inputs == doc.MemberEnd()) return Bad("inputs", "is required");
  INFERD_ASSIGN_OR_RETURN(s.inputs, ParseInputs(inputs->value));
  if (auto outs = doc.FindMember("outputs"); outs != doc.MemberEnd()) {
    if (!outs->value.IsArray()) return Bad("outputs", "must be an array of output names");
    std::set<std::string> seen;
    for (const auto& o : outs->value.GetArray()) {
      if (!o.IsString()) return Bad("outputs", "must be an array of output names");
      std::string name(o.GetString(), o.GetStringLength());
      INFERD_RETURN_IF_ERROR(CheckName(name, "outputs"));
      if (name.size() > kMaxNameBytes) return Bad("outputs", "names an output longer than 256 bytes");
      if (!seen.insert(name).second) return Bad("outputs", "names '" + name + "' twice");
      if (s.outputs.size() >= 4096) return Bad("outputs", "names more than 4096 outputs");
      s.outputs.push_back(std::move(name));
    }
  }
  INFERD_ASSIGN_OR_RETURN(s.rows_per_request, Integer(doc, "rows_per_request", 0, 0, kMaxRowsPerRequest));
  INFERD_ASSIGN_OR_RETURN(s.max_in_flight, Integer(doc, "max_in_flight", 4, 1, kMaxInFlight));
  INFERD_ASSIGN_OR_RETURN(s.commit_rows, Integer(doc, "commit_rows", 1000, 1, kMaxCommitRows));
  INFERD_ASSIGN_OR_RETURN(s.max_row_errors, Integer(doc, "max_row_errors", 100, 0, INT64_MAX));
  return s;
}

std::string ToJson(const JobSpec& s) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  w.StartObject();
  w.Key("model");
  WriteString(w, s.model);
  if (!s.version.empty()) {
    w.Key("version");
    WriteString(w, s.version);
  }
  auto store = [&](StoreType t, const std::string& path, const std::string& conn, const char* extra_name,
                   const std::string& extra) {
    w.StartObject();
    w.Key("type");
    const std::string_view tn = StoreTypeName(t);
    w.String(tn.data(), static_cast<rapidjson::SizeType>(tn.size()));
    if (!path.empty()) {
      w.Key("path");
      WriteString(w, path);
    }
    if (!conn.empty()) {
      w.Key("connection");
      WriteString(w, conn);
    }
    if (!extra.empty()) {
      w.Key(extra_name);
      WriteString(w, extra);
    }
    w.EndObject();
  };
  w.Key("source");
  store(s.source.type, s.source.path, s.source.connection, "query", s.source.query);
  w.Key("sink");
  store(s.sink.type, s.sink.path, s.sink.connection, "table", s.sink.table);
  w.Key("key");
  WriteString(w, s.key);
  w.Key("inputs");
  w.StartObject();
  for (const auto& im : s.inputs) {
    w.Key(im.tensor.data(), static_cast<rapidjson::SizeType>(im.tensor.size()));
    w.StartArray();
    for (const auto& c : im.columns) WriteString(w, c);
    w.EndArray();
  }
  w.EndObject();
  if (!s.outputs.empty()) {
    w.Key("outputs");
    w.StartArray();
    for (const auto& o : s.outputs) WriteString(w, o);
    w.EndArray();
  }
  w.Key("rows_per_request");
  w.Int64(s.rows_per_request);
  w.Key("max_in_flight");
  w.Int64(s.max_in_flight);
  w.Key("commit_rows");
  w.Int64(s.commit_rows);
  w.Key("max_row_errors");
  w.Int64(s.max_row_errors);
  w.EndObject();
  return std::string(buf.GetString(), buf.GetSize());
}

}  // namespace inferd::jobs
