#include "manager/calibration_data.h"

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>

#include "core/number_text.h"

namespace inferd {
namespace {

constexpr int kMaxDepth = 32;

// One JSON number (or boolean) as core/number_text.h's AppendNumber takes it.
struct Number {
  bool is_int;
  int64_t i;
  double d;
};

// Appends the values of a (nested) array; false on anything but numbers (and
// booleans), more than `limit` values, or nesting deeper than kMaxDepth.
bool Flatten(const rapidjson::Value& v, std::vector<Number>* out, size_t limit, int depth = 0) {
  if (depth > kMaxDepth) return false;
  for (const auto& e : v.GetArray()) {
    if (out->size() > limit) return false;
    if (e.IsArray()) {
      if (!Flatten(e, out, limit, depth + 1)) return false;
    } else if (e.IsBool()) {
      out->push_back({true, e.GetBool() ? 1 : 0, 0});
    } else if (e.IsInt64()) {
      out->push_back({true, e.GetInt64(), 0});
    } else if (e.IsNumber()) {
      out->push_back({false, 0, e.GetDouble()});
    } else {
      return false;
    }
  }
  return true;
}

Result<Tensor> ParseInput(const rapidjson::Value& in, const TensorSpec& ts, const ModelSpec& spec,
                          const std::string& what) {
  const auto dt = DataTypeFromWire(in["datatype"].GetString());
  if (!dt || *dt != ts.dtype) {
    return Status::InvalidArgument(what + ": datatype " + in["datatype"].GetString() + " is not the input's " +
                                   std::string(DataTypeToWire(ts.dtype)));
  }
  if (ts.dtype == DataType::kBytes || DataTypeByteSize(ts.dtype) == 0) {
    return Status::InvalidArgument(what + ": " + std::string(DataTypeToWire(ts.dtype)) +
                                   " inputs cannot be given in a calibration file");
  }
  Shape shape;
  for (const auto& d : in["shape"].GetArray()) {
    if (!d.IsInt64() || d.GetInt64() < 0 || d.GetInt64() > (int64_t{1} << 31))
      return Status::InvalidArgument(what + ": shape holds something other than sizes");
    shape.push_back(d.GetInt64());
  }
  const bool batched = spec.max_batch_size > 0;
  Shape item(shape.begin() + (batched && !shape.empty() ? 1 : 0), shape.end());
  if (batched && (shape.empty() || shape[0] < 1 || shape[0] > spec.max_batch_size)) {
    return Status::InvalidArgument(what + ": the first dimension is the batch: 1 to " +
                                   std::to_string(spec.max_batch_size) + " rows");
  }
  if (!ts.any_rank) {
    bool fits = item.size() == ts.dims.size();
    for (size_t i = 0; fits && i < item.size(); ++i) fits = ts.dims[i] == -1 || ts.dims[i] == item[i];
    if (!fits) return Status::InvalidArgument(what + ": shape " + ShapeToString(shape) + " does not fit the input's");
  }
  const int64_t count = ElementCount(shape);
  if (count < 0 || static_cast<size_t>(count) > kMaxCalibrationBytes)
    return Status::InvalidArgument(what + ": too many values");
  std::vector<Number> values;
  if (!Flatten(in["data"], &values, static_cast<size_t>(count)))
    return Status::InvalidArgument(what + ": data holds something other than numbers (or nests too deep)");
  if (static_cast<int64_t>(values.size()) != count) {
    return Status::InvalidArgument(what + ": " + std::to_string(values.size()) + " values for shape " +
                                   ShapeToString(shape));
  }
  if (ts.reshape && ElementCount(*ts.reshape) == ElementCount(item)) {
    Shape r;
    if (batched) r.push_back(shape[0]);
    r.insert(r.end(), ts.reshape->begin(), ts.reshape->end());
    shape = std::move(r);
  }
  auto buffer = std::make_shared<std::string>();
  buffer->reserve(values.size() * DataTypeByteSize(ts.dtype));
  for (size_t i = 0; i < values.size(); ++i) {
    const Number& n = values[i];
    // AppendNumber narrows reals to FP32 as they are: a value beyond FP32's range is refused here, not made inf.
    const bool too_large = ts.dtype == DataType::kFp32 && !n.is_int && std::isfinite(n.d) &&
                           std::abs(n.d) > std::numeric_limits<float>::max();
    if (too_large || !AppendNumber(buffer.get(), ts.dtype, n.is_int, n.i, n.d))
      return Status::InvalidArgument(what + ": value " + std::to_string(i) + " does not fit " +
                                     std::string(DataTypeToWire(ts.dtype)));
  }
  return Tensor::Own(ts.name, ts.dtype, std::move(shape), std::move(buffer));
}

Result<WarmupSample> ParseRequest(const rapidjson::Value& req, size_t index, const ModelSpec& spec) {
  const std::string where = "calibration request " + std::to_string(index);
  if (!req.IsObject() || !req.HasMember("inputs") || !req["inputs"].IsArray())
    return Status::InvalidArgument(where + ": not an object with an \"inputs\" array");
  WarmupSample s;
  s.name = where;
  std::vector<const rapidjson::Value*> by_input(spec.inputs.size(), nullptr);
  for (const auto& in : req["inputs"].GetArray()) {
    if (!in.IsObject() || !in.HasMember("name") || !in["name"].IsString() || !in.HasMember("datatype") ||
        !in["datatype"].IsString() || !in.HasMember("shape") || !in["shape"].IsArray() || !in.HasMember("data") ||
        !in["data"].IsArray()) {
      return Status::InvalidArgument(where + ": every input has a name, datatype, shape and data array");
    }
    const std::string name(in["name"].GetString(), in["name"].GetStringLength());
    size_t i = 0;
    while (i < spec.inputs.size() && spec.inputs[i].name != name) ++i;
    if (i == spec.inputs.size()) return Status::InvalidArgument(where + ": unknown input '" + name + "'");
    if (by_input[i]) return Status::InvalidArgument(where + ": input '" + name + "' given twice");
    by_input[i] = &in;
  }
  int64_t rows = -1;
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    const TensorSpec& ts = spec.inputs[i];
    if (!by_input[i]) {
      if (ts.optional) continue;
      return Status::InvalidArgument(where + ": no data for input '" + ts.name + "'");
    }
    INFERD_ASSIGN_OR_RETURN(Tensor t, ParseInput(*by_input[i], ts, spec, where + " input '" + ts.name + "'"));
    if (spec.max_batch_size > 0) {
      if (rows >= 0 && t.shape[0] != rows) return Status::InvalidArgument(where + ": inputs differ in their rows");
      rows = t.shape[0];
    }
    s.inputs.push_back(std::move(t));
  }
  return s;
}

}  // namespace

Result<std::vector<WarmupSample>> ParseCalibrationData(std::string_view text, const ModelSpec& spec) {
  if (text.size() > kMaxCalibrationBytes) {
    return Status::InvalidArgument("calibration file larger than " + std::to_string(kMaxCalibrationBytes >> 20) +
                                   " MiB");
  }
  rapidjson::Document doc;
  doc.Parse<rapidjson::kParseIterativeFlag>(text.data(), text.size());
  if (doc.HasParseError()) {
    return Status::InvalidArgument(std::string("calibration file is not JSON: ") +
                                   rapidjson::GetParseError_En(doc.GetParseError()) + " at offset " +
                                   std::to_string(doc.GetErrorOffset()));
  }
  std::vector<WarmupSample> out;
  if (doc.IsArray()) {
    if (doc.Size() == 0 || doc.Size() > kMaxCalibrationSamples) {
      return Status::InvalidArgument("calibration file holds 1 to " + std::to_string(kMaxCalibrationSamples) +
                                     " requests, not " + std::to_string(doc.Size()));
    }
    for (size_t i = 0; i < doc.Size(); ++i) {
      INFERD_ASSIGN_OR_RETURN(WarmupSample s, ParseRequest(doc[static_cast<rapidjson::SizeType>(i)], i, spec));
      out.push_back(std::move(s));
    }
  } else {
    INFERD_ASSIGN_OR_RETURN(WarmupSample s, ParseRequest(doc, 0, spec));
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace inferd
