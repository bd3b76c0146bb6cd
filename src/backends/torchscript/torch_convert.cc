#include "backends/torchscript/torch_convert.h"

namespace inferd::torchscript {

std::optional<at::ScalarType> ToTorchType(DataType dt) {
  switch (dt) {
    case DataType::kBool:
      return at::kBool;
    case DataType::kUint8:
      return at::kByte;
    case DataType::kInt8:
      return at::kChar;
    case DataType::kInt16:
      return at::kShort;
    case DataType::kInt32:
      return at::kInt;
    case DataType::kInt64:
      return at::kLong;
    case DataType::kFp16:
      return at::kHalf;
    case DataType::kBf16:
      return at::kBFloat16;
    case DataType::kFp32:
      return at::kFloat;
    case DataType::kFp64:
      return at::kDouble;
    default:
      return std::nullopt;
  }
}

std::optional<DataType> FromTorchType(at::ScalarType st) {
  switch (st) {
    case at::kBool:
      return DataType::kBool;
    case at::kByte:
      return DataType::kUint8;
    case at::kChar:
      return DataType::kInt8;
    case at::kShort:
      return DataType::kInt16;
    case at::kInt:
      return DataType::kInt32;
    case at::kLong:
      return DataType::kInt64;
    case at::kHalf:
      return DataType::kFp16;
    case at::kBFloat16:
      return DataType::kBf16;
    case at::kFloat:
      return DataType::kFp32;
    case at::kDouble:
      return DataType::kFp64;
    default:
      return std::nullopt;
  }
}

Result<at::Tensor> ToTorch(const Tensor& t) {
  auto st = ToTorchType(t.dtype);
  if (!st) {
    return Status::InvalidArgument("input '" + t.name + "': datatype " + std::string(DataTypeToWire(t.dtype)) +
                                   " is not supported by the pytorch backend");
  }
  std::vector<int64_t> sizes(t.shape.begin(), t.shape.end());
  // from_blob needs a non-const pointer; inferd never writes through it and
  // TorchScript models that modify inputs in place only touch this request's copy.
  return torch::from_blob(const_cast<std::byte*>(t.data), sizes, torch::TensorOptions().dtype(*st));
}

Result<Tensor> FromTorch(at::Tensor t, std::string name) {
  if (!t.device().is_cpu()) t = t.cpu();
  auto dt = FromTorchType(t.scalar_type());
  if (!dt) {
    return Status::Internal("output '" + name + "' has torch type " + std::string(c10::toString(t.scalar_type())) +
                            " which inferd cannot return");
  }
  if (!t.is_contiguous()) t = t.contiguous();
  Tensor out;
  out.name = std::move(name);
  out.dtype = *dt;
  out.shape.assign(t.sizes().begin(), t.sizes().end());
  out.byte_size = static_cast<size_t>(t.numel()) * t.element_size();
  out.data = static_cast<const std::byte*>(t.data_ptr());
  out.owner = std::make_shared<at::Tensor>(std::move(t));
  return out;
}

}  // namespace inferd::torchscript
