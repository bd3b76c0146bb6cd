// Helpers shared by the op builders (ops/*.cc). Internal to the executor.
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "backends/onnx/kernel.h"
#include "backends/onnx/value.h"
#include "core/status.h"

namespace inferd::onnxexec::ops {

// Input i as a tensor; INVALID_ARGUMENT when absent or not a tensor.
inline Result<at::Tensor> In(const std::vector<const Value*>& in, size_t i, const char* what = "input") {
  if (i >= in.size() || in[i] == nullptr) {
    return Status::InvalidArgument(std::string(what) + " " + std::to_string(i) + " is missing");
  }
  if (!in[i]->is_tensor())
    return Status::InvalidArgument(std::string(what) + " " + std::to_string(i) + " is not a tensor");
  return in[i]->tensor();
}

inline bool Present(const std::vector<const Value*>& in, size_t i) { return i < in.size() && in[i] != nullptr; }

// An int64 (or int32) tensor's values.
inline std::vector<int64_t> Ints(const at::Tensor& t) {
  at::Tensor c = t.to(at::kLong).contiguous();
  const int64_t* p = c.data_ptr<int64_t>();
  return std::vector<int64_t>(p, p + c.numel());
}

inline at::Tensor IntTensor(const std::vector<int64_t>& v) {
  return at::tensor(at::ArrayRef<int64_t>(v), at::TensorOptions().dtype(at::kLong));
}

// axis in [-rank, rank) -> [0, rank).
inline Result<int64_t> Axis(int64_t axis, int64_t rank, const char* what = "axis") {
  if (axis < -rank || axis >= rank) {
    return Status::InvalidArgument(std::string(what) + " " + std::to_string(axis) + " outside [-" +
                                   std::to_string(rank) + ", " + std::to_string(rank) + ")");
  }
  return axis < 0 ? axis + rank : axis;
}

inline Compiled Make(Kernel k, bool deterministic = true) {
  Compiled c;
  c.kernel = std::move(k);
  c.deterministic = deterministic;
  return c;
}

inline bool IsFloating(const at::Tensor& t) { return at::isFloatingType(t.scalar_type()); }

// ONNX pads (all begins, then all ends): whether every begin equals its end.
inline bool SymmetricPads(const std::vector<int64_t>& pads) {
  const size_t n = pads.size() / 2;
  for (size_t i = 0; i < n; ++i)
    if (pads[i] != pads[i + n]) return false;
  return true;
}

void RegisterElementwiseOps(OpRegistry& r);
void RegisterShapeOps(OpRegistry& r);
void RegisterNnOps(OpRegistry& r);
void RegisterReduceOps(OpRegistry& r);
void RegisterSequenceOps(OpRegistry& r);
void RegisterControlOps(OpRegistry& r);
void RegisterRnnOps(OpRegistry& r);
void RegisterTrainingOps(OpRegistry& r);
void RegisterLossOps(OpRegistry& r);
void RegisterResizeOps(OpRegistry& r);
void RegisterQuantizedOps(OpRegistry& r);  // after RegisterNnOps (ConvInteger runs its Conv)
// Wraps Conv, Relu, Add, MaxPool, GlobalAveragePool: register last.
void RegisterMkldnnOps(OpRegistry& r, bool winograd);
void RegisterInt8Ops(OpRegistry& r);  // over RegisterMkldnnOps' builders

}  // namespace inferd::onnxexec::ops
