#include "backends/python/protocol.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <cstring>

namespace inferd::python {
namespace {

using Writer = rapidjson::Writer<rapidjson::StringBuffer>;

void Str(Writer& w, std::string_view s) { w.String(s.data(), static_cast<rapidjson::SizeType>(s.size())); }

void WriteDesc(Writer& w, const TensorDesc& d) {
  w.StartObject();
  w.Key("name");
  Str(w, d.name);
  w.Key("datatype");
  Str(w, DataTypeToWire(d.dtype));
  w.Key("shape");
  w.StartArray();
  for (int64_t s : d.shape) w.Int64(s);
  w.EndArray();
  w.Key("offset");
  w.Uint64(d.offset);
  w.Key("size");
  w.Uint64(d.size);
  w.EndObject();
}

void WriteParameters(Writer& w, const Parameters* params) {
  w.StartObject();
  if (params) {
    for (const auto& [k, v] : *params) {
      Str(w, k);
      if (const bool* b = std::get_if<bool>(&v))
        w.Bool(*b);
      else if (const int64_t* i = std::get_if<int64_t>(&v))
        w.Int64(*i);
      else if (const double* d = std::get_if<double>(&v))
        w.Double(*d);
      else
        Str(w, std::get<std::string>(v));
    }
  }
  w.EndObject();
}

std::string Done(const rapidjson::StringBuffer& sb) { return std::string(sb.GetString(), sb.GetSize()); }

Status Bad(const std::string& why) { return Status::Internal("malformed message from the Python worker: " + why); }

Result<std::string> GetString(const rapidjson::Value& o, const char* key, bool required = true) {
  auto it = o.FindMember(key);
  if (it == o.MemberEnd() || it->value.IsNull()) {
    if (required) return Bad(std::string("no '") + key + "'");
    return std::string();
  }
  if (!it->value.IsString()) return Bad(std::string("'") + key + "' is not a string");
  return std::string(it->value.GetString(), it->value.GetStringLength());
}

Result<uint64_t> GetUint(const rapidjson::Value& o, const char* key) {
  auto it = o.FindMember(key);
  if (it == o.MemberEnd() || !it->value.IsUint64()) return Bad(std::string("'") + key + "' is not an unsigned integer");
  return it->value.GetUint64();
}

Result<TensorDesc> ParseDesc(const rapidjson::Value& v) {
  if (!v.IsObject()) return Bad("a tensor is not an object");
  TensorDesc d;
  INFERD_ASSIGN_OR_RETURN(d.name, GetString(v, "name"));
  INFERD_ASSIGN_OR_RETURN(std::string dt, GetString(v, "datatype"));
  auto dtype = DataTypeFromWire(dt);
  if (!dtype || *dtype == DataType::kInvalid) return Bad("tensor '" + d.name + "' has datatype '" + dt + "'");
  d.dtype = *dtype;
  auto shape = v.FindMember("shape");
  if (shape == v.MemberEnd() || !shape->value.IsArray()) return Bad("tensor '" + d.name + "' has no shape");
  if (shape->value.Size() > 64) return Bad("tensor '" + d.name + "' has over 64 dimensions");
  for (const auto& s : shape->value.GetArray()) {
    if (!s.IsInt64() || s.GetInt64() < 0) return Bad("tensor '" + d.name + "' has a bad dimension");
    d.shape.push_back(s.GetInt64());
  }
  INFERD_ASSIGN_OR_RETURN(d.offset, GetUint(v, "offset"));
  INFERD_ASSIGN_OR_RETURN(d.size, GetUint(v, "size"));
  return d;
}

Result<std::vector<TensorDesc>> ParseDescs(const rapidjson::Value& o, const char* key) {
  auto it = o.FindMember(key);
  if (it == o.MemberEnd() || !it->value.IsArray()) return Bad(std::string("'") + key + "' is not a list");
  std::vector<TensorDesc> out;
  for (const auto& v : it->value.GetArray()) {
    INFERD_ASSIGN_OR_RETURN(TensorDesc d, ParseDesc(v));
    out.push_back(std::move(d));
  }
  return out;
}

// An answer's error: the (code, message) pair the worker sent.
Result<std::pair<int64_t, std::string>> ParseError(const rapidjson::Value& e) {
  if (!e.IsObject()) return Bad("an error is not an object");
  INFERD_ASSIGN_OR_RETURN(std::string message, GetString(e, "message"));
  int64_t code = 0;
  auto c = e.FindMember("code");
  if (c != e.MemberEnd() && c->value.IsInt64()) code = c->value.GetInt64();
  return std::make_pair(code, std::move(message));
}

// One response: {"outputs": [...]} or {"error": {...}}.
Result<Result<std::vector<TensorDesc>>> ParseAnswer(const rapidjson::Value& r) {
  if (!r.IsObject()) return Bad("a response is not an object");
  auto err = r.FindMember("error");
  if (err != r.MemberEnd() && !err->value.IsNull()) {
    INFERD_ASSIGN_OR_RETURN(auto error, ParseError(err->value));
    return Result<std::vector<TensorDesc>>(StatusFromTritonError(error.first, std::move(error.second)));
  }
  INFERD_ASSIGN_OR_RETURN(auto outs, ParseDescs(r, "outputs"));
  return Result<std::vector<TensorDesc>>(std::move(outs));
}

Result<Parameters> ParseParameters(const rapidjson::Value& o) {
  Parameters out;
  auto it = o.FindMember("parameters");
  if (it == o.MemberEnd() || it->value.IsNull()) return out;
  if (!it->value.IsObject()) return Bad("'parameters' is not an object");
  for (const auto& m : it->value.GetObject()) {
    std::string key(m.name.GetString(), m.name.GetStringLength());
    const auto& v = m.value;
    if (v.IsBool())
      out[key] = v.GetBool();
    else if (v.IsInt64())
      out[key] = v.GetInt64();
    else if (v.IsNumber())
      out[key] = v.GetDouble();
    else if (v.IsString())
      out[key] = std::string(v.GetString(), v.GetStringLength());
    else
      return Bad("parameter '" + key + "' is not a bool, number or string");
  }
  return out;
}

}  // namespace

std::string EncodeInit(const InitMessage& m) {
  rapidjson::StringBuffer sb;
  Writer w(sb);
  w.StartObject();
  w.Key("type");
  w.String("init");
  w.Key("args");
  w.StartObject();
  for (const auto& [k, v] : m.args) {
    Str(w, k);
    Str(w, v);
  }
  w.EndObject();
  w.Key("model_file");
  Str(w, m.model_file);
  w.Key("version_dir");
  Str(w, m.version_dir);
  w.Key("shm_limit");
  w.Uint64(m.shm_limit);
  w.Key("auto_complete");
  w.Bool(m.auto_complete);
  w.EndObject();
  return Done(sb);
}

std::string EncodeExecute(std::string_view model, uint64_t in_size, const std::vector<RequestToSend>& requests,
                          bool decoupled) {
  rapidjson::StringBuffer sb;
  Writer w(sb);
  w.StartObject();
  w.Key("type");
  w.String("execute");
  w.Key("model");
  Str(w, model);
  w.Key("in_size");
  w.Uint64(in_size);
  if (decoupled) {
    w.Key("decoupled");
    w.Bool(true);
  }
  w.Key("requests");
  w.StartArray();
  for (const auto& r : requests) {
    w.StartObject();
    w.Key("id");
    Str(w, r.id);
    w.Key("parameters");
    WriteParameters(w, r.parameters);
    w.Key("inputs");
    w.StartArray();
    for (const auto& d : r.inputs) WriteDesc(w, d);
    w.EndArray();
    w.Key("outputs");
    w.StartArray();
    for (const auto& o : r.outputs) Str(w, o);
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return Done(sb);
}

std::string EncodeBlsResult(uint64_t id, uint64_t in_size, const Status& status, const std::vector<TensorDesc>& outputs,
                            bool final) {
  rapidjson::StringBuffer sb;
  Writer w(sb);
  w.StartObject();
  w.Key("type");
  w.String("bls_result");
  w.Key("id");
  w.Uint64(id);
  w.Key("in_size");
  w.Uint64(in_size);
  w.Key("final");
  w.Bool(final);
  w.Key("error");
  if (status.ok()) {
    w.Null();
  } else {
    w.StartObject();
    w.Key("message");
    Str(w, status.message());
    w.Key("code");
    w.Int64(TritonErrorCode(status));
    w.EndObject();
  }
  w.Key("outputs");
  w.StartArray();
  for (const auto& d : outputs) WriteDesc(w, d);
  w.EndArray();
  w.EndObject();
  return Done(sb);
}

std::string EncodeFinalize() { return R"({"type":"finalize"})"; }

Result<WorkerMessage> ParseWorkerMessage(std::string_view json, size_t max_answers) {
  rapidjson::Document doc;
  doc.Parse(json.data(), json.size());
  if (doc.HasParseError() || !doc.IsObject()) return Bad("not a JSON object");
  WorkerMessage m;
  INFERD_ASSIGN_OR_RETURN(std::string type, GetString(doc, "type"));
  if (auto it = doc.FindMember("out_size"); it != doc.MemberEnd()) {
    if (!it->value.IsUint64()) return Bad("'out_size' is not an unsigned integer");
    m.out_size = it->value.GetUint64();
  }
  using K = WorkerMessage::Kind;
  if (type == "ready") {
    m.kind = K::kReady;
  } else if (type == "init_error" || type == "execute_error") {
    m.kind = type == "init_error" ? K::kInitError : K::kExecuteError;
    INFERD_ASSIGN_OR_RETURN(m.text, GetString(doc, "message"));
  } else if (type == "finalized") {
    m.kind = K::kFinalized;
    INFERD_ASSIGN_OR_RETURN(m.text, GetString(doc, "message", false));
  } else if (type == "log") {
    m.kind = K::kLog;
    INFERD_ASSIGN_OR_RETURN(m.level, GetString(doc, "level"));
    INFERD_ASSIGN_OR_RETURN(m.text, GetString(doc, "message"));
  } else if (type == "config") {
    m.kind = K::kConfig;
    auto it = doc.FindMember("config");
    if (it == doc.MemberEnd() || !it->value.IsObject()) return Bad("'config' is not an object");
    rapidjson::StringBuffer sb;
    Writer w(sb);
    it->value.Accept(w);
    m.config_json = Done(sb);
    auto def = doc.FindMember("defined");
    m.config_defined = def != doc.MemberEnd() && def->value.IsBool() && def->value.GetBool();
  } else if (type == "responses") {
    m.kind = K::kResponses;
    auto it = doc.FindMember("responses");
    if (it == doc.MemberEnd() || !it->value.IsArray()) return Bad("'responses' is not a list");
    if (it->value.Size() > max_answers) return Bad("more responses than requests");
    for (const auto& r : it->value.GetArray()) {
      INFERD_ASSIGN_OR_RETURN(auto answer, ParseAnswer(r));
      m.answers.push_back(std::move(answer));
    }
  } else if (type == "response") {
    m.kind = K::kResponse;
    INFERD_ASSIGN_OR_RETURN(uint64_t request, GetUint(doc, "request"));
    if (request >= max_answers) return Bad("a response to a request that was not sent");
    m.request = static_cast<size_t>(request);
    auto final = doc.FindMember("final");
    if (final == doc.MemberEnd() || !final->value.IsBool()) return Bad("'final' is not a bool");
    m.final = final->value.GetBool();
    INFERD_ASSIGN_OR_RETURN(auto answer, ParseAnswer(doc));
    m.answers.push_back(std::move(answer));
  } else if (type == "executed") {
    m.kind = K::kExecuted;
  } else if (type == "bls") {
    m.kind = K::kBls;
    INFERD_ASSIGN_OR_RETURN(m.bls.id, GetUint(doc, "id"));
    INFERD_ASSIGN_OR_RETURN(m.bls.model, GetString(doc, "model"));
    INFERD_ASSIGN_OR_RETURN(m.bls.version, GetString(doc, "version", false));
    INFERD_ASSIGN_OR_RETURN(m.bls.request_id, GetString(doc, "request_id", false));
    INFERD_ASSIGN_OR_RETURN(m.bls.inputs, ParseDescs(doc, "inputs"));
    auto outs = doc.FindMember("outputs");
    if (outs != doc.MemberEnd()) {
      if (!outs->value.IsArray()) return Bad("'outputs' is not a list");
      for (const auto& o : outs->value.GetArray()) {
        if (!o.IsString()) return Bad("a requested output is not a string");
        m.bls.outputs.emplace_back(o.GetString(), o.GetStringLength());
      }
    }
    INFERD_ASSIGN_OR_RETURN(m.bls.parameters, ParseParameters(doc));
    if (auto t = doc.FindMember("timeout_us"); t != doc.MemberEnd() && t->value.IsUint64())
      m.bls.timeout_us = t->value.GetUint64();
    if (auto d = doc.FindMember("decoupled"); d != doc.MemberEnd() && d->value.IsBool())
      m.bls.decoupled = d->value.GetBool();
    if (auto t = doc.FindMember("trace"); t != doc.MemberEnd() && t->value.IsInt64())
      m.bls.trace_index = t->value.GetInt64();
  } else {
    return Bad("unknown message type '" + type + "'");
  }
  return m;
}

Result<Tensor> CopyTensor(const TensorDesc& d, std::span<const std::byte> region) {
  if (d.offset > region.size() || d.size > region.size() - d.offset) {
    return Status::Internal("tensor '" + d.name + "' lies outside the Python worker's shared memory");
  }
  Tensor t = Tensor::Copy(d.name, d.dtype, d.shape, region.subspan(d.offset, d.size));
  Status st = t.Validate();
  if (!st.ok()) return Status::Internal("the Python worker's tensor is inconsistent: " + st.message());
  return t;
}

Status StatusFromTritonError(int64_t code, std::string message) {
  switch (code) {
    case 2:
      return Status::NotFound(std::move(message));
    case 3:
      return Status::InvalidArgument(std::move(message));
    case 4:
      return Status::Unavailable(std::move(message));
    case 5:
      return Status::Unimplemented(std::move(message));
    case 6:
      return Status::AlreadyExists(std::move(message));
    case 7:
      return Status::Cancelled(std::move(message));
    default:  // UNKNOWN, INTERNAL
      return Status::Internal(std::move(message));
  }
}

int64_t TritonErrorCode(const Status& status) {
  switch (status.code()) {
    case StatusCode::kNotFound:
      return 2;
    case StatusCode::kInvalidArgument:
    case StatusCode::kFailedPrecondition:
      return 3;
    case StatusCode::kUnavailable:
    case StatusCode::kDeadlineExceeded:
    case StatusCode::kResourceExhausted:
      return 4;
    case StatusCode::kUnimplemented:
      return 5;
    case StatusCode::kAlreadyExists:
      return 6;
    case StatusCode::kCancelled:
      return 7;
    default:
      return 1;
  }
}

}  // namespace inferd::python
