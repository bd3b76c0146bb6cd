#include "frontends/codec/tfserving_v1.h"

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>

#include "frontends/codec/json_limits.h"
#include "frontends/codec/json_tensor.h"
#include "frontends/codec/json_writer.h"

namespace inferd::v1 {
namespace {

bool IsB64(const rapidjson::Value& v) { return v.IsObject() && v.MemberCount() == 1 && v.HasMember("b64"); }

const InputInfo* FindInput(const std::vector<InputInfo>& inputs, std::string_view name) {
  for (const auto& i : inputs)
    if (i.name == name) return &i;
  return nullptr;
}

// Row format: stack each input's per-instance values along a new dim 0.
Result<std::vector<Tensor>> ParseInstances(const rapidjson::Value& instances, const std::vector<InputInfo>& inputs) {
  if (!instances.IsArray() || instances.Empty())
    return Status::InvalidArgument("'instances' must be a non-empty array");
  const auto& arr = instances.GetArray();
  const bool named = arr[0].IsObject() && !IsB64(arr[0]);
  if (!named && inputs.size() != 1) {
    return Status::InvalidArgument("the model has " + std::to_string(inputs.size()) +
                                   " inputs: each instance must be an object mapping input names to values");
  }
  std::vector<Tensor> out;
  for (const auto& info : inputs) {
    std::vector<Tensor> rows;
    Shape row_shape;
    for (rapidjson::SizeType i = 0; i < arr.Size(); ++i) {
      const rapidjson::Value* v = &arr[i];
      if (named) {
        if (!v->IsObject() || IsB64(*v))
          return Status::InvalidArgument("instance " + std::to_string(i) + " must be an object");
        auto it = v->FindMember(info.name.c_str());
        if (it == v->MemberEnd()) {
          return Status::InvalidArgument("instance " + std::to_string(i) + " has no value for input '" + info.name +
                                         "'");
        }
        v = &it->value;
      }
      INFERD_ASSIGN_OR_RETURN(Shape s, json::InferShape(*v));
      if (i == 0)
        row_shape = s;
      else if (s != row_shape) {
        return Status::InvalidArgument("instances disagree on the shape of input '" + info.name +
                                       "': " + ShapeToString(row_shape) + " vs " + ShapeToString(s));
      }
      Shape full = {1};
      full.insert(full.end(), s.begin(), s.end());
      INFERD_ASSIGN_OR_RETURN(Tensor t, json::DecodeTensorData(*v, info.dtype, std::move(full), info.name, true));
      rows.push_back(std::move(t));
    }
    std::vector<const Tensor*> parts;
    for (const auto& r : rows) parts.push_back(&r);
    INFERD_ASSIGN_OR_RETURN(Tensor stacked, ConcatRows(parts, info.name));
    out.push_back(std::move(stacked));
  }
  if (named) {
    for (const auto& m : arr[0].GetObject()) {
      if (!FindInput(inputs, std::string_view(m.name.GetString(), m.name.GetStringLength()))) {
        return Status::InvalidArgument(std::string("unknown input '") + m.name.GetString() + "' in instances");
      }
    }
  }
  return out;
}

Result<Tensor> ParseColumn(const rapidjson::Value& v, const InputInfo& info) {
  INFERD_ASSIGN_OR_RETURN(Shape s, json::InferShape(v));
  return json::DecodeTensorData(v, info.dtype, std::move(s), info.name, true);
}

Result<std::vector<Tensor>> ParseInputs(const rapidjson::Value& v, const std::vector<InputInfo>& inputs) {
  std::vector<Tensor> out;
  if (v.IsObject() && !IsB64(v)) {
    for (const auto& m : v.GetObject()) {
      const InputInfo* info = FindInput(inputs, std::string_view(m.name.GetString(), m.name.GetStringLength()));
      if (!info) return Status::InvalidArgument(std::string("unknown input '") + m.name.GetString() + "' in 'inputs'");
      INFERD_ASSIGN_OR_RETURN(Tensor t, ParseColumn(m.value, *info));
      out.push_back(std::move(t));
    }
    return out;
  }
  if (inputs.size() != 1) {
    return Status::InvalidArgument("the model has " + std::to_string(inputs.size()) +
                                   " inputs: 'inputs' must be an object mapping input names to tensors");
  }
  INFERD_ASSIGN_OR_RETURN(Tensor t, ParseColumn(v, inputs[0]));
  out.push_back(std::move(t));
  return out;
}

void AppendValue(std::string* b, const Tensor& t, int64_t row) {
  Shape dims(t.shape.begin() + (row >= 0 ? 1 : 0), t.shape.end());
  const int64_t first = row >= 0 ? row * ElementCount(dims) : 0;
  json::AppendNestedData(b, t, dims, first, true);
}

}  // namespace

Result<PredictRequest> ReadPredictRequest(std::string_view body, std::string model_name, std::string model_version,
                                          const JsonLimits& limits) {
  // Parse (not in situ) copies the strings: the document outlives the body.
  auto doc = std::make_shared<rapidjson::Document>();
  const json::LimitedParse parsed = json::ParseWithin<json::kParseFlags>(doc.get(), body, limits);
  if (!parsed.over.empty()) return parsed.LimitError();
  if (parsed.result.IsError()) {
    return Status::InvalidArgument(std::string("malformed JSON in request body at offset ") +
                                   std::to_string(parsed.result.Offset()) + ": " +
                                   rapidjson::GetParseError_En(parsed.result.Code()));
  }
  if (!doc->IsObject()) return Status::InvalidArgument("request body must be a JSON object");
  if (auto it = doc->FindMember("signature_name"); it != doc->MemberEnd() && !it->value.IsString()) {
    return Status::InvalidArgument("'signature_name' must be a string");
  }
  const bool has_instances = doc->HasMember("instances"), has_inputs = doc->HasMember("inputs");
  if (has_instances == has_inputs) {
    return Status::InvalidArgument(
        "request must have exactly one of 'instances' (row format) or 'inputs' (columnar format)");
  }
  PredictRequest pr;
  pr.request = std::make_unique<InferRequest>();
  pr.request->model_name = std::move(model_name);
  pr.request->model_version = std::move(model_version);
  pr.format = has_instances ? Format::kRow : Format::kColumnar;
  pr.request->decode = [doc, has_instances](const std::vector<InputInfo>& inputs, InferRequest& r) -> Status {
    INFERD_ASSIGN_OR_RETURN(
        r.inputs, has_instances ? ParseInstances((*doc)["instances"], inputs) : ParseInputs((*doc)["inputs"], inputs));
    return Status::OK();
  };
  return pr;
}

Result<PredictRequest> ParsePredictRequest(std::string_view body, const std::vector<InputInfo>& inputs,
                                           std::string model_name, std::string model_version) {
  INFERD_ASSIGN_OR_RETURN(auto pr, ReadPredictRequest(body, std::move(model_name), std::move(model_version)));
  INFERD_RETURN_IF_ERROR(pr.request->RunDecode(inputs));
  return pr;
}

Result<std::string> EncodePredictResponse(const InferResponse& resp, Format format) {
  std::string b;
  const auto& outs = resp.outputs;
  if (format == Format::kColumnar) {
    b = "{\"outputs\":";
    if (outs.size() == 1) {
      AppendValue(&b, outs[0], -1);
    } else {
      b.push_back('{');
      for (size_t i = 0; i < outs.size(); ++i) {
        if (i) b.push_back(',');
        json::AppendKey(&b, outs[i].name);
        AppendValue(&b, outs[i], -1);
      }
      b.push_back('}');
    }
    b.push_back('}');
    return b;
  }
  int64_t rows = -1;
  for (const auto& t : outs) {
    if (t.shape.empty())
      return Status::InvalidArgument("output '" + t.name +
                                     "' has no batch dimension: use the columnar ('inputs') format");
    if (rows >= 0 && t.shape[0] != rows) return Status::Internal("outputs disagree on the batch size");
    rows = t.shape[0];
  }
  b = "{\"predictions\":[";
  for (int64_t r = 0; r < rows; ++r) {
    if (r) b.push_back(',');
    if (outs.size() == 1) {
      AppendValue(&b, outs[0], r);
      continue;
    }
    b.push_back('{');
    for (size_t i = 0; i < outs.size(); ++i) {
      if (i) b.push_back(',');
      json::AppendKey(&b, outs[i].name);
      AppendValue(&b, outs[i], r);
    }
    b.push_back('}');
  }
  b.append("]}");
  return b;
}

}  // namespace inferd::v1
