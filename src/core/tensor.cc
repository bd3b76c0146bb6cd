#include "core/tensor.h"

#include <algorithm>
#include <cstring>

namespace inferd {

int64_t ElementCount(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return -1;
    if (d != 0 && n > INT64_MAX / d) return -1;
    n *= d;
  }
  return n;
}

std::string ShapeToString(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(shape[i]);
  }
  s += ']';
  return s;
}

Tensor Tensor::Allocate(std::string name, DataType dtype, Shape shape, size_t bytes, std::byte** out) {
  // make_shared<byte[]> value-initialises (zeroes) the array.
  auto buf = std::make_shared<std::byte[]>(bytes == 0 ? 1 : bytes);
  *out = buf.get();
  Tensor t;
  t.name = std::move(name);
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.data = buf.get();
  t.byte_size = bytes;
  t.owner = std::move(buf);
  return t;
}

Tensor Tensor::Own(std::string name, DataType dtype, Shape shape, std::shared_ptr<const std::string> buffer) {
  Tensor t;
  t.name = std::move(name);
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.data = reinterpret_cast<const std::byte*>(buffer->data());
  t.byte_size = buffer->size();
  t.owner = std::move(buffer);
  return t;
}

Tensor Tensor::Copy(std::string name, DataType dtype, Shape shape, std::span<const std::byte> src) {
  std::byte* dst;
  Tensor t = Allocate(std::move(name), dtype, std::move(shape), src.size(), &dst);
  if (!src.empty()) std::memcpy(dst, src.data(), src.size());
  return t;
}

Status Tensor::Validate() const {
  const int64_t n = element_count();
  if (n < 0) return Status::InvalidArgument("tensor '" + name + "' has invalid shape " + ShapeToString(shape));
  if (dtype == DataType::kInvalid) return Status::InvalidArgument("tensor '" + name + "' has no datatype");
  if (dtype == DataType::kBytes) {
    auto elems = SplitBytesElements(bytes());
    if (!elems.ok()) return elems.status().WithPrefix("tensor '" + name + "'");
    if (static_cast<int64_t>(elems->size()) != n) {
      return Status::InvalidArgument("tensor '" + name + "' has " + std::to_string(elems->size()) +
                                     " BYTES elements but shape " + ShapeToString(shape) + " needs " +
                                     std::to_string(n));
    }
    return Status::OK();
  }
  const size_t elem = DataTypeByteSize(dtype);
  if (static_cast<uint64_t>(n) > SIZE_MAX / elem) {
    return Status::InvalidArgument("tensor '" + name + "' shape " + ShapeToString(shape) + " is too large");
  }
  const size_t want = static_cast<size_t>(n) * elem;
  if (byte_size != want) {
    return Status::InvalidArgument("tensor '" + name + "' has " + std::to_string(byte_size) +
                                   " bytes of data but shape " + ShapeToString(shape) + " of " +
                                   std::string(DataTypeToWire(dtype)) + " needs " + std::to_string(want));
  }
  return Status::OK();
}

namespace {
uint32_t ReadLen(const std::byte* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) | (static_cast<uint32_t>(p[2]) << 16) |
         (static_cast<uint32_t>(p[3]) << 24);
}
}  // namespace

Result<Tensor> Tensor::SliceRows(int64_t begin, int64_t count) const {
  if (shape.empty() || begin < 0 || count < 0 || begin + count > shape[0]) {
    return Status::Internal("slice [" + std::to_string(begin) + "," + std::to_string(begin + count) +
                            ") out of range for tensor '" + name + "' of shape " + ShapeToString(shape));
  }
  Tensor out;
  out.name = name;
  out.dtype = dtype;
  out.shape = shape;
  out.shape[0] = count;
  out.owner = owner;
  Shape row_shape(shape.begin() + 1, shape.end());
  const int64_t per_row = ElementCount(row_shape);
  if (dtype != DataType::kBytes) {
    const size_t row_bytes = static_cast<size_t>(per_row) * DataTypeByteSize(dtype);
    out.data = data + static_cast<size_t>(begin) * row_bytes;
    out.byte_size = static_cast<size_t>(count) * row_bytes;
    return out;
  }
  // BYTES: walk the prefixes to find the byte range of the elements.
  size_t off = 0;
  const int64_t first = begin * per_row, last = (begin + count) * per_row;
  size_t start = 0;
  for (int64_t i = 0; i < last; ++i) {
    if (i == first) start = off;
    if (off + 4 > byte_size) return Status::Internal("BYTES tensor truncated");
    off += 4 + ReadLen(data + off);
  }
  if (first == last) start = off;
  out.data = data + start;
  out.byte_size = off - start;
  return out;
}

void AppendBytesElement(std::string* out, std::span<const std::byte> element) {
  AppendBytesElement(out, std::string_view(reinterpret_cast<const char*>(element.data()), element.size()));
}

void AppendBytesElement(std::string* out, std::string_view element) {
  const auto n = static_cast<uint32_t>(element.size());
  const char len[4] = {static_cast<char>(n & 0xff), static_cast<char>((n >> 8) & 0xff),
                       static_cast<char>((n >> 16) & 0xff), static_cast<char>((n >> 24) & 0xff)};
  out->append(len, 4);
  out->append(element);
}

Result<std::vector<std::string_view>> SplitBytesElements(std::span<const std::byte> data) {
  std::vector<std::string_view> out;
  size_t off = 0;
  while (off < data.size()) {
    if (data.size() - off < 4) return Status::InvalidArgument("BYTES data truncated in a length prefix");
    const uint32_t len = ReadLen(data.data() + off);
    off += 4;
    if (data.size() - off < len) return Status::InvalidArgument("BYTES element length exceeds the data");
    out.emplace_back(reinterpret_cast<const char*>(data.data() + off), len);
    off += len;
  }
  return out;
}

Result<Tensor> ConcatRows(const std::vector<const Tensor*>& parts, std::string name) {
  if (parts.empty()) return Status::Internal("ConcatRows of nothing");
  const Tensor& first = *parts.front();
  if (parts.size() == 1) {
    Tensor t = first;
    t.name = std::move(name);
    return t;
  }
  Shape shape = first.shape;
  if (shape.empty()) return Status::Internal("ConcatRows of scalars");
  int64_t rows = 0;
  size_t bytes = 0;
  for (const Tensor* p : parts) {
    if (p->dtype != first.dtype || p->shape.size() != shape.size() ||
        !std::equal(p->shape.begin() + 1, p->shape.end(), shape.begin() + 1)) {
      return Status::Internal("ConcatRows of incompatible tensors");
    }
    rows += p->shape[0];
    bytes += p->byte_size;
  }
  shape[0] = rows;
  std::byte* dst;
  Tensor out = Tensor::Allocate(std::move(name), first.dtype, std::move(shape), bytes, &dst);
  for (const Tensor* p : parts) {
    if (p->byte_size) std::memcpy(dst, p->data, p->byte_size);
    dst += p->byte_size;
  }
  return out;
}

}  // namespace inferd
