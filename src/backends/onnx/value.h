// Value: what flows along an ONNX graph's edges in the executor. A tensor
// (at::Tensor, any ATen dtype), a string tensor (ATen has none), a sequence
// of values, or an absent optional. Values are immutable once produced:
// kernels never write into their inputs, so a value may be shared by every
// consumer without copies.
// Thread-safety: immutable values may be read from any thread.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace inferd::onnxexec {

struct StringTensor {
  std::vector<int64_t> shape;
  std::vector<std::string> data;  // row-major, product(shape) elements
};

class Value {
 public:
  enum class Kind { kEmpty, kTensor, kStrings, kSequence, kNoneOptional };

  Value() = default;
  static Value Of(at::Tensor t) {
    Value v;
    v.kind_ = Kind::kTensor;
    v.tensor_ = std::move(t);
    return v;
  }
  static Value Of(StringTensor s) {
    Value v;
    v.kind_ = Kind::kStrings;
    v.strings_ = std::make_shared<const StringTensor>(std::move(s));
    return v;
  }
  static Value Sequence(std::vector<Value> items, int32_t elem_type) {
    Value v;
    v.kind_ = Kind::kSequence;
    v.sequence_ = std::make_shared<const std::vector<Value>>(std::move(items));
    v.seq_elem_type_ = elem_type;
    return v;
  }
  static Value NoneOptional() {
    Value v;
    v.kind_ = Kind::kNoneOptional;
    return v;
  }

  Kind kind() const { return kind_; }
  bool empty() const { return kind_ == Kind::kEmpty; }
  bool is_tensor() const { return kind_ == Kind::kTensor; }
  bool is_strings() const { return kind_ == Kind::kStrings; }
  bool is_sequence() const { return kind_ == Kind::kSequence; }
  const at::Tensor& tensor() const { return tensor_; }
  const StringTensor& strings() const { return *strings_; }
  const std::vector<Value>& sequence() const { return *sequence_; }
  // The ONNX element type of a sequence's tensors (0 when unknown).
  int32_t sequence_elem_type() const { return seq_elem_type_; }

 private:
  Kind kind_ = Kind::kEmpty;
  at::Tensor tensor_;
  std::shared_ptr<const StringTensor> strings_;
  std::shared_ptr<const std::vector<Value>> sequence_;
  int32_t seq_elem_type_ = 0;
};

}  // namespace inferd::onnxexec
