#include "frontends/codec/generate.h"

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>

#include "frontends/codec/json_limits.h"
#include "frontends/codec/json_tensor.h"
#include "frontends/codec/json_writer.h"

namespace inferd::generate {

namespace {

// The inputs of a generate request's JSON object `doc` (every key but "id" and "parameters").
Status DecodeInputs(const rapidjson::Value& doc, const std::vector<InputInfo>& inputs, InferRequest& req) {
  for (const auto& m : doc.GetObject()) {
    const std::string_view key(m.name.GetString(), m.name.GetStringLength());
    if (key == "id" || key == "parameters") continue;
    const InputInfo* info = nullptr;
    for (const auto& in : inputs)
      if (in.name == key) info = &in;
    if (info == nullptr) {
      std::string names;
      for (const auto& in : inputs) names += (names.empty() ? "" : ", ") + in.name;
      return Status::InvalidArgument("unexpected key '" + std::string(key) +
                                     "' in generate request: the model's inputs are " + names +
                                     " (plus 'id' and 'parameters')");
    }
    for (const auto& t : req.inputs)
      if (t.name == key) return Status::InvalidArgument("input '" + std::string(key) + "' is given twice");
    auto shape = json::InferShape(m.value);
    if (!shape.ok()) return shape.status().WithPrefix("input '" + std::string(key) + "'");
    if (shape->empty()) shape->push_back(1);
    if (shape->size() > info->shape.size() && !info->shape.empty()) {
      return Status::InvalidArgument("input '" + std::string(key) + "' has " + std::to_string(shape->size()) +
                                     " dimensions; the model's input has " + std::to_string(info->shape.size()));
    }
    while (shape->size() < info->shape.size()) shape->insert(shape->begin(), 1);
    auto tensor = json::DecodeTensorData(m.value, info->dtype, std::move(*shape), std::string(key));
    if (!tensor.ok()) return tensor.status();
    req.inputs.push_back(std::move(*tensor));
  }
  return Status::OK();
}

}  // namespace

Result<std::unique_ptr<InferRequest>> ReadGenerateRequest(std::string_view body, std::string model_name,
                                                          std::string model_version, const JsonLimits& limits) {
  // Parse (not in situ) copies the strings: the document outlives the body.
  auto doc = std::make_shared<rapidjson::Document>();
  const json::LimitedParse parsed = json::ParseWithin<json::kParseFlags>(doc.get(), body, limits);
  if (!parsed.over.empty()) return parsed.LimitError();
  if (parsed.result.IsError()) {
    return Status::InvalidArgument(std::string("malformed generate request JSON: ") +
                                   rapidjson::GetParseError_En(parsed.result.Code()) + " at offset " +
                                   std::to_string(parsed.result.Offset()));
  }
  if (!doc->IsObject()) return Status::InvalidArgument("a generate request must be a JSON object");
  auto req = std::make_unique<InferRequest>();
  req->model_name = std::move(model_name);
  req->model_version = std::move(model_version);
  for (const auto& m : doc->GetObject()) {
    const std::string_view key(m.name.GetString(), m.name.GetStringLength());
    if (key == "id") {
      if (!m.value.IsString()) return Status::InvalidArgument("'id' must be a string");
      req->id.assign(m.value.GetString(), m.value.GetStringLength());
    } else if (key == "parameters") {
      INFERD_RETURN_IF_ERROR(json::ParseParameters(m.value, &req->parameters, "request", /*json_values=*/true));
    }
  }
  req->decode = [doc](const std::vector<InputInfo>& inputs, InferRequest& r) { return DecodeInputs(*doc, inputs, r); };
  return req;
}

Result<std::unique_ptr<InferRequest>> ParseGenerateRequest(std::string_view body, const std::vector<InputInfo>& inputs,
                                                           std::string model_name, std::string model_version) {
  INFERD_ASSIGN_OR_RETURN(auto req, ReadGenerateRequest(body, std::move(model_name), std::move(model_version)));
  INFERD_RETURN_IF_ERROR(req->RunDecode(inputs));
  return req;
}

std::string EncodeGenerateResponse(const InferResponse& response) {
  std::string b = "{\"model_name\":";
  json::AppendEscaped(&b, response.model_name);
  b.append(",\"model_version\":");
  json::AppendEscaped(&b, response.model_version);
  if (!response.id.empty()) {
    b.append(",\"id\":");
    json::AppendEscaped(&b, response.id);
  }
  for (const auto& t : response.outputs) {
    b.push_back(',');
    json::AppendKey(&b, t.name);
    if (t.element_count() == 1)
      json::AppendNestedData(&b, t, Shape{}, 0, /*b64_bytes=*/false);
    else
      json::AppendFlatData(&b, t);
  }
  b.push_back('}');
  return b;
}

}  // namespace inferd::generate
