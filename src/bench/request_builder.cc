#include "bench/request_builder.h"

#include <rapidjson/document.h>

#include <charconv>
#include <cmath>
#include <fstream>
#include <random>
#include <sstream>

#include "core/number_text.h"
#include "frontends/codec/json_tensor.h"
#include "frontends/codec/json_writer.h"

namespace inferd::bench {

Result<Protocol> ParseProtocol(const std::string& name) {
  if (name == "v2-json" || name == "http") return Protocol::kV2Json;
  if (name == "v2-binary") return Protocol::kV2Binary;
  if (name == "v1") return Protocol::kV1;
  return Status::InvalidArgument("unknown protocol '" + name + "' (v2-json, v2-binary, v1)");
}

Result<ModelDesc> ParseModelMetadata(const std::string& json) {
  rapidjson::Document doc;
  doc.Parse(json.data(), json.size());
  if (doc.HasParseError() || !doc.IsObject() || !doc.HasMember("inputs") || !doc["inputs"].IsArray()) {
    return Status::InvalidArgument("not a KServe v2 model metadata response: " + json.substr(0, 200));
  }
  ModelDesc m;
  if (doc.HasMember("name") && doc["name"].IsString()) m.name = doc["name"].GetString();
  for (const auto& in : doc["inputs"].GetArray()) {
    if (!in.IsObject() || !in.HasMember("name") || !in.HasMember("datatype") || !in.HasMember("shape")) {
      return Status::InvalidArgument("bad input in metadata");
    }
    InputDesc d;
    d.name = in["name"].GetString();
    auto dt = DataTypeFromWire(in["datatype"].GetString());
    if (!dt) return Status::InvalidArgument("unknown datatype in metadata");
    d.dtype = *dt;
    for (const auto& s : in["shape"].GetArray()) d.shape.push_back(s.GetInt64());
    m.inputs.push_back(std::move(d));
  }
  m.batched = !m.inputs.empty() && !m.inputs[0].shape.empty() && m.inputs[0].shape[0] == -1;
  return m;
}

namespace {

Shape Concrete(const ModelDesc& m, const InputDesc& in, int batch, int64_t length) {
  Shape s = in.shape;
  for (size_t i = 0; i < s.size(); ++i)
    if (s[i] < 0) s[i] = (i == 0 && m.batched) ? batch : length;
  return s;
}

template <typename T>
void Fill(std::string* buf, int64_t n, std::mt19937_64& rng, double lo, double hi) {
  std::uniform_real_distribution<double> u(lo, hi);
  for (int64_t i = 0; i < n; ++i) {
    T v = static_cast<T>(u(rng));
    buf->append(reinterpret_cast<const char*>(&v), sizeof v);
  }
}

}  // namespace

Result<std::pair<int64_t, int64_t>> ParseLengthRange(const std::string& text) {
  const size_t dash = text.find('-');
  int64_t lo = 0, hi = 0;
  try {
    size_t used = 0;
    lo = std::stoll(text.substr(0, dash), &used);
    if (used != (dash == std::string::npos ? text.size() : dash)) throw std::invalid_argument("");
    hi = lo;
    if (dash != std::string::npos) {
      hi = std::stoll(text.substr(dash + 1), &used);
      if (used != text.size() - dash - 1) throw std::invalid_argument("");
    }
  } catch (const std::exception&) {
    return Status::InvalidArgument("'" + text + "' is not a length or a range LO-HI");
  }
  if (lo < 1 || hi < lo || hi > (1 << 24))
    return Status::InvalidArgument("lengths '" + text + "' must be 1 <= LO <= HI");
  return std::make_pair(lo, hi);
}

std::vector<Tensor> RandomInputs(const ModelDesc& model, int batch_size, uint64_t seed, const RandomOptions& options) {
  std::mt19937_64 rng(seed);
  std::vector<Tensor> out;
  const double ilo = options.int_lo, ihi = options.int_hi;
  for (const auto& in : model.inputs) {
    Shape shape = Concrete(model, in, batch_size, options.length);
    const int64_t n = ElementCount(shape);
    std::string buf;
    if (auto c = options.constants.find(in.name); c != options.constants.end()) {
      // One value everywhere (a mask of ones).
      std::string one;
      const double v = c->second;
      const bool is_int = std::fabs(v) < 9e18 && v == static_cast<double>(static_cast<int64_t>(v));
      if (!AppendNumber(&one, in.dtype, is_int, is_int ? static_cast<int64_t>(v) : 0, v))
        one.assign(DataTypeByteSize(in.dtype), '\0');
      for (int64_t k = 0; k < n; ++k) buf.append(one);
      out.push_back(
          Tensor::Copy(in.name, in.dtype, shape,
                       std::span<const std::byte>(reinterpret_cast<const std::byte*>(buf.data()), buf.size())));
      continue;
    }
    switch (in.dtype) {
      case DataType::kBool:
        Fill<uint8_t>(&buf, n, rng, 0, 2);
        break;
      case DataType::kUint8:
        Fill<uint8_t>(&buf, n, rng, 0, 100);
        break;
      case DataType::kUint16:
        Fill<uint16_t>(&buf, n, rng, 0, 100);
        break;
      case DataType::kUint32:
        Fill<uint32_t>(&buf, n, rng, 0, 100);
        break;
      case DataType::kUint64:
        Fill<uint64_t>(&buf, n, rng, 0, 100);
        break;
      case DataType::kInt8:
        Fill<int8_t>(&buf, n, rng, -50, 50);
        break;
      case DataType::kInt16:
        Fill<int16_t>(&buf, n, rng, -50, 50);
        break;
      case DataType::kInt32:
        Fill<int32_t>(&buf, n, rng, ilo, ihi);
        break;
      case DataType::kInt64:
        Fill<int64_t>(&buf, n, rng, ilo, ihi);
        break;
      case DataType::kFp64:
        Fill<double>(&buf, n, rng, 0, 1);
        break;
      case DataType::kFp16:
      case DataType::kBf16: {
        std::uniform_real_distribution<float> u(0, 1);
        for (int64_t i = 0; i < n; ++i) {
          uint16_t h = in.dtype == DataType::kFp16 ? FloatToHalf(u(rng)) : FloatToBf16(u(rng));
          buf.append(reinterpret_cast<const char*>(&h), 2);
        }
        break;
      }
      case DataType::kBytes:
        for (int64_t i = 0; i < n; ++i) AppendBytesElement(&buf, std::string_view("inferd"));
        break;
      case DataType::kFp32:
      case DataType::kInvalid:
        Fill<float>(&buf, n, rng, 0, 1);
        break;
    }
    out.push_back(Tensor::Copy(in.name, in.dtype, shape,
                               std::span<const std::byte>(reinterpret_cast<const std::byte*>(buf.data()), buf.size())));
  }
  return out;
}

Result<std::vector<std::vector<Tensor>>> InputsFromFile(const std::string& path, const ModelDesc& model) {
  std::ifstream f(path);
  if (!f) return Status::NotFound("cannot read input data file '" + path + "'");
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string text = ss.str();
  rapidjson::Document doc;
  doc.Parse<json::kParseFlags>(text.data(), text.size());
  if (doc.HasParseError() || !doc.IsObject() || !doc.HasMember("data") || !doc["data"].IsArray()) {
    return Status::InvalidArgument(path + ": expected {\"data\": [{input: values}, ...]}");
  }
  std::vector<std::vector<Tensor>> sets;
  for (const auto& entry : doc["data"].GetArray()) {
    if (!entry.IsObject()) return Status::InvalidArgument(path + ": each data entry must be an object");
    std::vector<Tensor> set;
    for (const auto& in : model.inputs) {
      auto it = entry.FindMember(in.name.c_str());
      if (it == entry.MemberEnd()) return Status::InvalidArgument(path + ": an entry lacks input '" + in.name + "'");
      const rapidjson::Value* values = &it->value;
      Shape shape = Concrete(model, in, 1, 1);
      if (values->IsObject()) {
        if (!values->HasMember("content") || !values->HasMember("shape")) {
          return Status::InvalidArgument(path + ": objects need 'content' and 'shape'");
        }
        shape.clear();
        for (const auto& d : (*values)["shape"].GetArray()) shape.push_back(d.GetInt64());
        values = &(*values)["content"];
      }
      INFERD_ASSIGN_OR_RETURN(Tensor t, json::DecodeTensorData(*values, in.dtype, shape, in.name));
      set.push_back(std::move(t));
    }
    sets.push_back(std::move(set));
  }
  if (sets.empty()) return Status::InvalidArgument(path + ": no data entries");
  return sets;
}

Result<RequestParameter> ParseRequestParameter(const std::string& text) {
  const size_t first = text.find(':');
  const size_t last = text.rfind(':');
  if (first == std::string::npos || first == last || first == 0)
    return Status::InvalidArgument("--request-parameter '" + text + "': expected name:value:type");
  RequestParameter p;
  p.name = text.substr(0, first);
  p.value = text.substr(first + 1, last - first - 1);
  const std::string type = text.substr(last + 1);
  if (type == "string") {
    p.type = RequestParameter::Type::kString;
  } else if (type == "int") {
    p.type = RequestParameter::Type::kInt;
    int64_t v = 0;
    auto r = std::from_chars(p.value.data(), p.value.data() + p.value.size(), v);
    if (r.ec != std::errc() || r.ptr != p.value.data() + p.value.size())
      return Status::InvalidArgument("--request-parameter '" + text + "': '" + p.value + "' is not an integer");
  } else if (type == "bool") {
    p.type = RequestParameter::Type::kBool;
    if (p.value != "true" && p.value != "false")
      return Status::InvalidArgument("--request-parameter '" + text + "': a bool is true or false");
  } else {
    return Status::InvalidArgument("--request-parameter '" + text + "': the type is string, int or bool");
  }
  return p;
}

Result<PreparedRequest> EncodeRequest(Protocol protocol, const ModelDesc& model, const std::string& version,
                                      const std::vector<Tensor>& inputs,
                                      const std::vector<RequestParameter>& parameters) {
  if (protocol == Protocol::kV1 && !parameters.empty())
    return Status::InvalidArgument("--request-parameter needs a v2 protocol");
  PreparedRequest r;
  const std::string base = "/" + std::string(protocol == Protocol::kV1 ? "v1" : "v2") + "/models/" + model.name +
                           (version.empty() ? "" : "/versions/" + version);
  std::string& b = r.body;
  if (protocol == Protocol::kV1) {
    r.path = base + ":predict";
    if (model.batched) {
      // Row format: one instance per row.
      const int64_t rows = inputs.empty() || inputs[0].shape.empty() ? 0 : inputs[0].shape[0];
      b = "{\"instances\":[";
      for (int64_t row = 0; row < rows; ++row) {
        if (row) b.push_back(',');
        if (inputs.size() > 1) b.push_back('{');
        for (size_t i = 0; i < inputs.size(); ++i) {
          if (i) b.push_back(',');
          if (inputs.size() > 1) json::AppendKey(&b, inputs[i].name);
          Shape dims(inputs[i].shape.begin() + 1, inputs[i].shape.end());
          json::AppendNestedData(&b, inputs[i], dims, row * ElementCount(dims), true);
        }
        if (inputs.size() > 1) b.push_back('}');
      }
      b += "]}";
    } else {
      b = "{\"inputs\":{";
      for (size_t i = 0; i < inputs.size(); ++i) {
        if (i) b.push_back(',');
        json::AppendKey(&b, inputs[i].name);
        json::AppendNestedData(&b, inputs[i], inputs[i].shape, 0, true);
      }
      b += "}}";
    }
    r.headers.emplace_back("Content-Type", "application/json");
    return r;
  }
  r.path = base + "/infer";
  const bool binary = protocol == Protocol::kV2Binary;
  b = "{\"inputs\":[";
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    if (i) b.push_back(',');
    b += "{\"name\":";
    json::AppendEscaped(&b, t.name);
    b += ",\"shape\":[";
    for (size_t k = 0; k < t.shape.size(); ++k) {
      if (k) b.push_back(',');
      json::AppendNumber(&b, t.shape[k]);
    }
    b += "],\"datatype\":\"";
    b += DataTypeToWire(t.dtype);
    b += "\"";
    if (binary) {
      b += ",\"parameters\":{\"binary_data_size\":";
      json::AppendNumber(&b, t.byte_size);
      b += "}}";
    } else {
      b += ",\"data\":";
      json::AppendFlatData(&b, t);
      b += "}";
    }
  }
  b += "]";
  if (binary || !parameters.empty()) {
    b += ",\"parameters\":{";
    bool first = true;
    if (binary) {
      b += "\"binary_data_output\":true";
      first = false;
    }
    for (const auto& p : parameters) {
      if (!first) b.push_back(',');
      first = false;
      json::AppendEscaped(&b, p.name);
      b.push_back(':');
      if (p.type == RequestParameter::Type::kString)
        json::AppendEscaped(&b, p.value);
      else
        b += p.value;  // checked by ParseRequestParameter: an integer, true or false
    }
    b += "}";
  }
  b += "}";
  if (binary) {
    const size_t header = b.size();
    for (const Tensor& t : inputs) b.append(reinterpret_cast<const char*>(t.data), t.byte_size);
    r.headers.emplace_back("Inference-Header-Content-Length", std::to_string(header));
    r.headers.emplace_back("Content-Type", "application/octet-stream");
  } else {
    r.headers.emplace_back("Content-Type", "application/json");
  }
  return r;
}

}  // namespace inferd::bench
