#include "backends/onnx/tensor_proto.h"

#include <cstring>

namespace inferd::onnxexec {
namespace {

using TP = onnx::TensorProto;

// One table per pairing, both directions read it, so they cannot drift apart.
constexpr std::pair<int32_t, at::ScalarType> kAtenTypes[] = {
    {TP::FLOAT, at::kFloat},   {TP::UINT8, at::kByte},        {TP::INT8, at::kChar}, {TP::INT16, at::kShort},
    {TP::INT32, at::kInt},     {TP::INT64, at::kLong},        {TP::BOOL, at::kBool}, {TP::FLOAT16, at::kHalf},
    {TP::DOUBLE, at::kDouble}, {TP::BFLOAT16, at::kBFloat16},
};
constexpr std::pair<int32_t, DataType> kDataTypes[] = {
    {TP::FLOAT, DataType::kFp32},    {TP::UINT8, DataType::kUint8},   {TP::INT8, DataType::kInt8},
    {TP::UINT16, DataType::kUint16}, {TP::INT16, DataType::kInt16},   {TP::INT32, DataType::kInt32},
    {TP::INT64, DataType::kInt64},   {TP::STRING, DataType::kBytes},  {TP::BOOL, DataType::kBool},
    {TP::FLOAT16, DataType::kFp16},  {TP::DOUBLE, DataType::kFp64},   {TP::UINT32, DataType::kUint32},
    {TP::UINT64, DataType::kUint64}, {TP::BFLOAT16, DataType::kBf16},
};

Status Bad(const onnx::TensorProto& t, const std::string& what) {
  return Status::InvalidArgument("tensor '" + t.name() + "': " + what);
}

template <typename Field>
Status CheckCount(const onnx::TensorProto& t, const Field& field, int64_t n) {
  if (static_cast<int64_t>(field.size()) != n) {
    return Bad(t, "holds " + std::to_string(field.size()) + " values for " + std::to_string(n) + " elements");
  }
  return Status::OK();
}

// How many values a tensor holds in its typed field (-1: no field for the type).
int64_t TypedCount(const onnx::TensorProto& t) {
  switch (t.data_type()) {
    case TP::FLOAT:
      return t.float_data_size();
    case TP::DOUBLE:
      return t.double_data_size();
    case TP::INT64:
      return t.int64_data_size();
    case TP::INT32:
    case TP::UINT8:
    case TP::INT8:
    case TP::INT16:
    case TP::BOOL:
    case TP::FLOAT16:
    case TP::BFLOAT16:
      return t.int32_data_size();
    default:
      return -1;
  }
}

}  // namespace

std::optional<at::ScalarType> ScalarTypeOf(int32_t onnx_type) {
  for (const auto& [onnx_t, aten_t] : kAtenTypes)
    if (onnx_t == onnx_type) return aten_t;
  return std::nullopt;
}

int32_t OnnxTypeOf(at::ScalarType t) {
  for (const auto& [onnx_t, aten_t] : kAtenTypes)
    if (aten_t == t) return onnx_t;
  return TP::UNDEFINED;
}

std::string OnnxTypeName(int32_t onnx_type) {
  if (onnx::TensorProto_DataType_IsValid(onnx_type)) {
    return onnx::TensorProto_DataType_Name(static_cast<onnx::TensorProto_DataType>(onnx_type));
  }
  return "type " + std::to_string(onnx_type);
}

DataType DataTypeOfOnnx(int32_t onnx_type) {
  for (const auto& [onnx_t, dt] : kDataTypes)
    if (onnx_t == onnx_type) return dt;
  return DataType::kInvalid;
}

int32_t OnnxTypeOfDataType(DataType t) {
  for (const auto& [onnx_t, dt] : kDataTypes)
    if (dt == t) return onnx_t;
  return TP::UNDEFINED;
}

Result<Value> FromTensorProto(const onnx::TensorProto& t) {
  if (t.data_location() == TP::EXTERNAL) return Bad(t, "external data was not loaded");
  if (t.has_segment()) return Bad(t, "segmented tensors are not supported");
  std::vector<int64_t> shape;
  int64_t n = 1;
  for (int64_t d : t.dims()) {
    if (d < 0) return Bad(t, "negative dimension " + std::to_string(d));
    if (d > 0 && n > (int64_t{1} << 40) / d) return Bad(t, "too many elements");
    n *= d;
    shape.push_back(d);
  }
  if (t.data_type() == TP::STRING) {
    INFERD_RETURN_IF_ERROR(CheckCount(t, t.string_data(), n));
    StringTensor s;
    s.shape = shape;
    s.data.assign(t.string_data().begin(), t.string_data().end());
    return Value::Of(std::move(s));
  }
  auto st = ScalarTypeOf(t.data_type());
  if (!st) return Bad(t, "element type " + OnnxTypeName(t.data_type()) + " is not supported");
  // The data must be there before anything is allocated (dims may claim
  // terabytes with no data behind them).
  const size_t elem = c10::elementSize(*st);
  const int64_t present = t.has_raw_data() ? static_cast<int64_t>(t.raw_data().size() / elem) : TypedCount(t);
  if (present != n || (t.has_raw_data() && t.raw_data().size() % elem != 0)) {
    return Bad(t, "holds data for " + std::to_string(present) + " elements, its dims say " + std::to_string(n));
  }
  at::Tensor out = at::empty(shape, at::TensorOptions().dtype(*st));
  void* dst = out.data_ptr();
  if (t.has_raw_data()) {
    if (n > 0) std::memcpy(dst, t.raw_data().data(), t.raw_data().size());
    return Value::Of(std::move(out));
  }
  switch (t.data_type()) {
    case TP::FLOAT:
      if (n > 0) std::memcpy(dst, t.float_data().data(), n * sizeof(float));
      break;
    case TP::DOUBLE:
      if (n > 0) std::memcpy(dst, t.double_data().data(), n * sizeof(double));
      break;
    case TP::INT64:
      if (n > 0) std::memcpy(dst, t.int64_data().data(), n * sizeof(int64_t));
      break;
    case TP::INT32:
      if (n > 0) std::memcpy(dst, t.int32_data().data(), n * sizeof(int32_t));
      break;
    case TP::UINT8:
    case TP::INT8:
    case TP::INT16:
    case TP::BOOL:
    case TP::FLOAT16:
    case TP::BFLOAT16: {
      auto* bytes = static_cast<uint8_t*>(dst);
      for (int64_t i = 0; i < n; ++i) {
        const int32_t v = t.int32_data(static_cast<int>(i));
        if (elem == 1) {
          bytes[i] = static_cast<uint8_t>(v);
        } else {
          const uint16_t h = static_cast<uint16_t>(v);
          std::memcpy(bytes + 2 * i, &h, 2);
        }
      }
      break;
    }
    default:
      return Bad(t, "element type " + OnnxTypeName(t.data_type()) + " is not supported");
  }
  return Value::Of(std::move(out));
}

Result<Value> FromSequenceProto(const onnx::SequenceProto& s) {
  std::vector<Value> items;
  int32_t elem = 0;
  if (s.elem_type() == onnx::SequenceProto::TENSOR) {
    for (const auto& t : s.tensor_values()) {
      INFERD_ASSIGN_OR_RETURN(Value v, FromTensorProto(t));
      elem = t.data_type();
      items.push_back(std::move(v));
    }
  } else if (s.elem_type() == onnx::SequenceProto::SEQUENCE) {
    for (const auto& inner : s.sequence_values()) {
      INFERD_ASSIGN_OR_RETURN(Value v, FromSequenceProto(inner));
      items.push_back(std::move(v));
    }
  } else {
    return Status::InvalidArgument("sequence '" + s.name() + "': element kind not supported");
  }
  return Value::Sequence(std::move(items), elem);
}

Result<Value> FromOptionalProto(const onnx::OptionalProto& o) {
  switch (o.elem_type()) {
    case onnx::OptionalProto::UNDEFINED:
      return Value::NoneOptional();
    case onnx::OptionalProto::TENSOR:
      return FromTensorProto(o.tensor_value());
    case onnx::OptionalProto::SEQUENCE:
      return FromSequenceProto(o.sequence_value());
    default:
      return Status::InvalidArgument("optional '" + o.name() + "': element kind not supported");
  }
}

}  // namespace inferd::onnxexec
