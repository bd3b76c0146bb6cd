// Tensor: a named, typed, shaped view of immutable bytes.
//
// Data is row-major. For BYTES tensors each element is serialized as a
// 4-byte little-endian length followed by that many bytes (the KServe binary
// layout), so every datatype is one contiguous byte range.
//
// Ownership: `owner` keeps the bytes alive; views (Slice, zero-copy parses of
// a request body, outputs that alias a backend's tensor) share it. Tensors are
// values: copying one copies the view, never the data.
//
// Thread-safety: immutable after construction; safe to share across threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/datatype.h"
#include "core/status.h"

namespace inferd {

using Shape = std::vector<int64_t>;

// A model's tensor as clients see it (metadata, decoding a body by the model's inputs).
struct TensorMetadata {
  std::string name;
  DataType dtype;
  Shape shape;  // as clients send it: -1 = variable (batch dim included when batching)
};

// Product of dims; -1 if any dim is negative; 1 for an empty shape (scalar).
int64_t ElementCount(const Shape& shape);
std::string ShapeToString(const Shape& shape);

struct Tensor {
  std::string name;
  DataType dtype = DataType::kInvalid;
  Shape shape;
  std::shared_ptr<const void> owner;
  const std::byte* data = nullptr;
  size_t byte_size = 0;

  std::span<const std::byte> bytes() const { return {data, byte_size}; }
  int64_t element_count() const { return ElementCount(shape); }

  template <typename T>
  const T* as() const {
    return reinterpret_cast<const T*>(data);
  }

  // A tensor owning a fresh zero-initialised buffer of `bytes` bytes; the
  // writable pointer is returned through `out`.
  static Tensor Allocate(std::string name, DataType dtype, Shape shape, size_t bytes, std::byte** out);

  // A tensor viewing all of `buffer`, which it keeps alive (no copy).
  static Tensor Own(std::string name, DataType dtype, Shape shape, std::shared_ptr<const std::string> buffer);

  // A tensor holding a copy of `src`.
  static Tensor Copy(std::string name, DataType dtype, Shape shape, std::span<const std::byte> src);

  // Checks byte_size against shape and dtype (for BYTES: walks the length
  // prefixes and counts elements).
  Status Validate() const;

  // Rows [begin, begin+count) along dimension 0, sharing the owner.
  // REQUIRES: shape non-empty, Validate().ok(), range within shape[0].
  Result<Tensor> SliceRows(int64_t begin, int64_t count) const;
};

// Appends one serialized BYTES element (length prefix + bytes).
void AppendBytesElement(std::string* out, std::span<const std::byte> element);
void AppendBytesElement(std::string* out, std::string_view element);

// Splits a serialized BYTES buffer into element views. Fails if truncated.
Result<std::vector<std::string_view>> SplitBytesElements(std::span<const std::byte> data);

// Concatenates tensors along dimension 0. All must share dtype and trailing dims.
Result<Tensor> ConcatRows(const std::vector<const Tensor*>& parts, std::string name);

}  // namespace inferd
