#include "backends/aten/torch_convert.h"

namespace inferd::aten {

namespace {
// One table for both directions, so they cannot drift apart. libtorch 1.13
// has no UINT16/32/64 or string tensors.
constexpr std::pair<DataType, at::ScalarType> kTypes[] = {
    {DataType::kBool, at::kBool},   {DataType::kUint8, at::kByte},    {DataType::kInt8, at::kChar},
    {DataType::kInt16, at::kShort}, {DataType::kInt32, at::kInt},     {DataType::kInt64, at::kLong},
    {DataType::kFp16, at::kHalf},   {DataType::kBf16, at::kBFloat16}, {DataType::kFp32, at::kFloat},
    {DataType::kFp64, at::kDouble},
};
}  // namespace

std::optional<at::ScalarType> ToTorchType(DataType dt) {
  for (const auto& [ours, theirs] : kTypes)
    if (ours == dt) return theirs;
  return std::nullopt;
}

std::optional<DataType> FromTorchType(at::ScalarType st) {
  for (const auto& [ours, theirs] : kTypes)
    if (theirs == st) return ours;
  return std::nullopt;
}

Result<at::Tensor> ToTorch(const Tensor& t) {
  auto st = ToTorchType(t.dtype);
  if (!st) {
    return Status::InvalidArgument("input '" + t.name + "': datatype " + std::string(DataTypeToWire(t.dtype)) +
                                   " is not supported by libtorch");
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

// An exception's message without libtorch's C++ backtrace (c10::Error
// appends one). A message longer than `limit` keeps its end: TorchScript
// puts the interpreter's traceback first and the actual error last
// ("RuntimeError: mat1 and mat2 shapes cannot be multiplied ...").
std::string Message(const std::exception& e, size_t limit) {
  std::string m;
  if (const auto* c10e = dynamic_cast<const c10::Error*>(&e))
    m = c10e->what_without_backtrace();
  else
    m = e.what();
  if (auto cut = m.find("\nException raised from"); cut != std::string::npos) m.resize(cut);
  while (!m.empty() && (m.back() == '\n' || m.back() == ' ')) m.pop_back();
  if (m.size() > limit) m = "..." + m.substr(m.size() - limit);
  return m;
}

}  // namespace inferd::aten
