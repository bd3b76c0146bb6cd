#include "core/padding.h"

#include <cstring>

namespace inferd {
namespace {

// Elements before `axis` (the outer loop) and after it (one contiguous run).
int64_t Product(const Shape& s, size_t from, size_t to) {
  int64_t n = 1;
  for (size_t i = from; i < to; ++i) n *= s[i];
  return n;
}

}  // namespace

Result<Tensor> PadConcat(const std::vector<const Tensor*>& parts, size_t axis, int64_t length, std::string_view pad,
                         std::string name) {
  if (parts.empty()) return Status::InvalidArgument("input '" + name + "': nothing to concatenate");
  const Tensor& first = *parts.front();
  const size_t elem = DataTypeByteSize(first.dtype);
  if (first.dtype == DataType::kBytes || elem == 0 || pad.size() != elem)
    return Status::InvalidArgument("input '" + name + "' cannot be padded (datatype " +
                                   std::string(DataTypeToWire(first.dtype)) + ")");
  if (axis == 0 || axis >= first.shape.size() || length < 0)
    return Status::InvalidArgument("input '" + name + "' has no dimension " + std::to_string(axis) + " to pad");
  int64_t rows = 0;
  for (const Tensor* p : parts) {
    if (p->dtype != first.dtype || p->shape.size() != first.shape.size())
      return Status::InvalidArgument("input '" + name + "': requests disagree on datatype or rank");
    for (size_t d = 1; d < first.shape.size(); ++d) {
      if (d != axis && p->shape[d] != first.shape[d])
        return Status::InvalidArgument("input '" + name + "': shapes " + ShapeToString(p->shape) + " and " +
                                       ShapeToString(first.shape) + " differ beyond the padded dimension");
    }
    if (p->shape[axis] > length)
      return Status::InvalidArgument("input '" + name + "' is longer than the padded length " + std::to_string(length));
    if (p->byte_size != static_cast<size_t>(p->element_count()) * elem)
      return Status::InvalidArgument("input '" + name + "' holds the wrong number of bytes for its shape");
    rows += p->shape[0];
  }
  Shape shape = first.shape;
  shape[0] = rows;
  shape[axis] = length;
  const size_t inner = static_cast<size_t>(Product(shape, axis + 1, shape.size())) * elem;  // bytes per position
  std::byte* out = nullptr;
  const int64_t total = ElementCount(shape);
  Tensor t = Tensor::Allocate(std::move(name), first.dtype, shape, static_cast<size_t>(total) * elem, &out);
  // The padding pattern for the longest tail any part needs, built once.
  std::string fill;
  for (const Tensor* p : parts) {
    const size_t need = static_cast<size_t>(length - p->shape[axis]) * inner;
    while (fill.size() < need) fill.append(pad);
  }
  for (const Tensor* p : parts) {
    const int64_t outer = Product(p->shape, 0, axis);
    const size_t have = static_cast<size_t>(p->shape[axis]) * inner;
    const size_t tail = static_cast<size_t>(length) * inner - have;
    const std::byte* src = p->data;
    for (int64_t o = 0; o < outer; ++o) {
      if (have) std::memcpy(out, src, have);
      if (tail) std::memcpy(out + have, fill.data(), tail);
      src += have;
      out += have + tail;
    }
  }
  return t;
}

Tensor FilledTensor(std::string name, DataType dtype, Shape shape, std::string_view element) {
  const int64_t n = ElementCount(shape);
  std::byte* out = nullptr;
  Tensor t = Tensor::Allocate(std::move(name), dtype, std::move(shape), static_cast<size_t>(n) * element.size(), &out);
  for (int64_t i = 0; i < n; ++i)
    std::memcpy(out + static_cast<size_t>(i) * element.size(), element.data(), element.size());
  return t;
}

Result<Tensor> CutAxis(const Tensor& t, size_t axis, int64_t length) {
  if (axis == 0 || axis >= t.shape.size() || t.shape[axis] < length || length < 0) {
    return Status::InvalidArgument("output '" + t.name + "' of shape " + ShapeToString(t.shape) + " cannot be cut to " +
                                   std::to_string(length) + " along dimension " + std::to_string(axis));
  }
  if (t.shape[axis] == length) return t;
  const size_t elem = DataTypeByteSize(t.dtype);
  if (t.dtype == DataType::kBytes || elem == 0 || t.byte_size != static_cast<size_t>(t.element_count()) * elem)
    return Status::InvalidArgument("output '" + t.name + "' cannot be cut (datatype or size)");
  Shape shape = t.shape;
  shape[axis] = length;
  const size_t inner = static_cast<size_t>(Product(t.shape, axis + 1, t.shape.size())) * elem;
  const int64_t outer = Product(t.shape, 0, axis);
  const size_t keep = static_cast<size_t>(length) * inner, stride = static_cast<size_t>(t.shape[axis]) * inner;
  std::byte* out = nullptr;
  Tensor r = Tensor::Allocate(t.name, t.dtype, std::move(shape), static_cast<size_t>(outer) * keep, &out);
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(out + static_cast<size_t>(o) * keep, t.data + static_cast<size_t>(o) * stride, keep);
  return r;
}

}  // namespace inferd
