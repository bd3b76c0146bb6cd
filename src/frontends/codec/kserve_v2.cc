#include "frontends/codec/kserve_v2.h"

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>

#include "frontends/codec/json_limits.h"
#include "frontends/codec/json_tensor.h"
#include "frontends/codec/json_writer.h"

namespace inferd::v2 {
namespace {

Result<Shape> ParseShape(const rapidjson::Value& v, const std::string& name) {
  if (!v.IsArray()) return Status::InvalidArgument("input '" + name + "': 'shape' must be an array of integers");
  Shape s;
  for (const auto& d : v.GetArray()) {
    if (!d.IsInt64() || d.GetInt64() < 0) {
      return Status::InvalidArgument("input '" + name + "': 'shape' must contain non-negative integers");
    }
    s.push_back(d.GetInt64());
  }
  if (s.size() > 32) return Status::InvalidArgument("input '" + name + "': too many dimensions");
  if (ElementCount(s) < 0) return Status::InvalidArgument("input '" + name + "': shape is too large");
  return s;
}

const rapidjson::Value* Member(const rapidjson::Value& obj, const char* key) {
  auto it = obj.FindMember(key);
  return it == obj.MemberEnd() ? nullptr : &it->value;
}

}  // namespace

Result<std::unique_ptr<InferRequest>> ParseInferRequest(std::shared_ptr<const std::string> body,
                                                        std::optional<size_t> header_length, std::string model_name,
                                                        std::string model_version, const JsonLimits& limits) {
  const size_t json_len = header_length.value_or(body->size());
  if (json_len > body->size()) {
    return Status::InvalidArgument("Inference-Header-Content-Length " + std::to_string(json_len) +
                                   " exceeds the body size " + std::to_string(body->size()));
  }
  rapidjson::Document doc;
  const json::LimitedParse parsed =
      json::ParseWithin<json::kParseFlags>(&doc, std::string_view(body->data(), json_len), limits);
  if (!parsed.over.empty()) return parsed.LimitError();
  if (parsed.result.IsError()) {
    return Status::InvalidArgument(std::string("malformed JSON in request body at offset ") +
                                   std::to_string(parsed.result.Offset()) + ": " +
                                   rapidjson::GetParseError_En(parsed.result.Code()));
  }
  if (!doc.IsObject()) return Status::InvalidArgument("request body must be a JSON object");

  auto req = std::make_unique<InferRequest>();
  req->model_name = std::move(model_name);
  req->model_version = std::move(model_version);
  if (const auto* id = Member(doc, "id")) {
    if (!id->IsString()) return Status::InvalidArgument("'id' must be a string");
    req->id.assign(id->GetString(), id->GetStringLength());
  }
  if (const auto* p = Member(doc, "parameters")) {
    INFERD_RETURN_IF_ERROR(json::ParseParameters(*p, &req->parameters, "request"));
    auto it = req->parameters.find("binary_data_output");
    if (it != req->parameters.end()) {
      const bool* b = std::get_if<bool>(&it->second);
      if (!b) return Status::InvalidArgument("parameter 'binary_data_output' must be a bool");
      req->binary_data_output = *b;
    }
  }

  const auto* inputs = Member(doc, "inputs");
  if (!inputs || !inputs->IsArray()) return Status::InvalidArgument("request needs an 'inputs' array");
  size_t binary_offset = json_len;
  for (const auto& in : inputs->GetArray()) {
    if (!in.IsObject()) return Status::InvalidArgument("each input must be an object");
    const auto* name = Member(in, "name");
    if (!name || !name->IsString()) return Status::InvalidArgument("each input needs a string 'name'");
    std::string n(name->GetString(), name->GetStringLength());
    const auto* dt = Member(in, "datatype");
    if (!dt || !dt->IsString()) return Status::InvalidArgument("input '" + n + "' needs a string 'datatype'");
    auto dtype = DataTypeFromWire(std::string_view(dt->GetString(), dt->GetStringLength()));
    if (!dtype) return Status::InvalidArgument("input '" + n + "' has unknown datatype '" + dt->GetString() + "'");
    const auto* sh = Member(in, "shape");
    if (!sh) return Status::InvalidArgument("input '" + n + "' needs a 'shape'");
    INFERD_ASSIGN_OR_RETURN(Shape shape, ParseShape(*sh, n));

    std::optional<uint64_t> binary_size;
    if (const auto* p = Member(in, "parameters")) {
      if (!p->IsObject()) return Status::InvalidArgument("input '" + n + "': 'parameters' must be an object");
      if (const auto* bs = Member(*p, "binary_data_size")) {
        if (!bs->IsUint64())
          return Status::InvalidArgument("input '" + n + "': 'binary_data_size' must be a non-negative integer");
        binary_size = bs->GetUint64();
      }
    }
    const auto* data = Member(in, "data");
    if (binary_size) {
      if (data) return Status::InvalidArgument("input '" + n + "' has both 'data' and 'binary_data_size'");
      if (!header_length) {
        return Status::InvalidArgument(
            "input '" + n + "' uses binary_data_size but the request has no Inference-Header-Content-Length header");
      }
      if (*binary_size > body->size() - binary_offset) {
        return Status::InvalidArgument("unexpected total byte size: input '" + n + "' needs " +
                                       std::to_string(*binary_size) + " bytes of binary data but only " +
                                       std::to_string(body->size() - binary_offset) + " remain in the body");
      }
      Tensor t;
      t.name = std::move(n);
      t.dtype = *dtype;
      t.shape = std::move(shape);
      t.owner = body;
      t.data = reinterpret_cast<const std::byte*>(body->data()) + binary_offset;
      t.byte_size = *binary_size;
      binary_offset += *binary_size;
      INFERD_RETURN_IF_ERROR(t.Validate());
      req->inputs.push_back(std::move(t));
    } else {
      if (!data) return Status::InvalidArgument("input '" + n + "' has no 'data'");
      INFERD_ASSIGN_OR_RETURN(Tensor t, json::DecodeTensorData(*data, *dtype, std::move(shape), std::move(n)));
      req->inputs.push_back(std::move(t));
    }
  }
  if (binary_offset != body->size()) {
    return Status::InvalidArgument("unexpected total byte size: the body has " +
                                   std::to_string(body->size() - binary_offset) +
                                   " bytes of binary data that no input claims");
  }

  if (const auto* outs = Member(doc, "outputs")) {
    if (!outs->IsArray()) return Status::InvalidArgument("'outputs' must be an array");
    for (const auto& o : outs->GetArray()) {
      if (!o.IsObject()) return Status::InvalidArgument("each requested output must be an object");
      const auto* name = Member(o, "name");
      if (!name || !name->IsString()) return Status::InvalidArgument("each requested output needs a string 'name'");
      RequestedOutput ro;
      ro.name.assign(name->GetString(), name->GetStringLength());
      if (const auto* p = Member(o, "parameters")) {
        if (!p->IsObject()) return Status::InvalidArgument("output '" + ro.name + "': 'parameters' must be an object");
        if (const auto* b = Member(*p, "binary_data")) {
          if (!b->IsBool()) return Status::InvalidArgument("output '" + ro.name + "': 'binary_data' must be a bool");
          ro.binary = b->GetBool();
          ro.binary_set = true;
        }
        if (const auto* c = Member(*p, "classification")) {
          // Triton's classification extension (server/classification.h).
          if (!c->IsInt64() || c->GetInt64() < 1 || c->GetInt64() > UINT32_MAX) {
            return Status::InvalidArgument("output '" + ro.name + "': 'classification' must be an integer >= 1");
          }
          ro.classification = static_cast<uint32_t>(c->GetInt64());
        }
      }
      for (const auto& prev : req->outputs)
        if (prev.name == ro.name) return Status::InvalidArgument("output '" + ro.name + "' is requested twice");
      req->outputs.push_back(std::move(ro));
    }
  }
  return req;
}

OutputOptions OutputOptionsOf(const InferRequest& r) { return {r.outputs, r.binary_data_output}; }

EncodedResponse EncodeInferResponse(const InferResponse& resp, const OutputOptions& options) {
  EncodedResponse out;
  std::string& b = out.body;
  b.reserve(256);
  b.append("{\"model_name\":");
  json::AppendEscaped(&b, resp.model_name);
  b.append(",\"model_version\":");
  json::AppendEscaped(&b, resp.model_version);
  if (!resp.id.empty()) {
    b.append(",\"id\":");
    json::AppendEscaped(&b, resp.id);
  }
  if (!resp.parameters.empty()) {
    b.append(",\"parameters\":{");
    bool first_param = true;
    for (const auto& [key, value] : resp.parameters) {
      if (!first_param) b.push_back(',');
      first_param = false;
      json::AppendKey(&b, key);
      std::visit(
          [&b](const auto& v) {
            using T = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<T, bool>)
              b.append(v ? "true" : "false");
            else if constexpr (std::is_same_v<T, std::string>)
              json::AppendEscaped(&b, v);
            else
              json::AppendNumber(&b, v);
          },
          value);
    }
    b.push_back('}');
  }
  b.append(",\"outputs\":[");
  std::vector<const Tensor*> binary;
  bool first = true;
  for (const Tensor& t : resp.outputs) {
    bool as_binary = options.binary_data_output;
    for (const auto& ro : options.outputs)
      if (ro.name == t.name && ro.binary_set) as_binary = ro.binary;
    if (!first) b.push_back(',');
    first = false;
    b.append("{\"name\":");
    json::AppendEscaped(&b, t.name);
    b.append(",\"datatype\":\"");
    b.append(DataTypeToWire(t.dtype));
    b.append("\",\"shape\":[");
    for (size_t i = 0; i < t.shape.size(); ++i) {
      if (i) b.push_back(',');
      json::AppendNumber(&b, t.shape[i]);
    }
    b.push_back(']');
    if (as_binary) {
      b.append(",\"parameters\":{\"binary_data_size\":");
      json::AppendNumber(&b, t.byte_size);
      b.append("}}");
      binary.push_back(&t);
    } else {
      b.append(",\"data\":");
      json::AppendFlatData(&b, t);
      b.push_back('}');
    }
  }
  b.append("]}");
  if (!binary.empty()) {
    out.header_length = b.size();
    size_t total = b.size();
    for (const Tensor* t : binary) total += t->byte_size;
    b.reserve(total);
    for (const Tensor* t : binary) b.append(reinterpret_cast<const char*>(t->data), t->byte_size);
  }
  return out;
}

std::string EncodeError(std::string_view message) {
  std::string b = "{\"error\":";
  json::AppendEscaped(&b, message);
  b.push_back('}');
  return b;
}

}  // namespace inferd::v2
