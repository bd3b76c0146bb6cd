// What a 2-D convolution is besides its weights (strides, symmetric padding,
// dilations, groups, a fused ReLU), the output shape it gives, and how many
// input shapes a oneDNN-backed kernel keeps primitives for. Shared by the
// ONNX executor's convolutions (onnx/ops/dnnl_conv.h) and the int8
// convolution (int8_conv.h) that ONNX and TorchScript models use.
// Thread-safety: values and a pure function.
#pragma once

#include <ATen/ATen.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/status.h"

namespace inferd::aten {

// Primitives kept per kernel object, one per input shape (dnnl_common.h's
// PrimitiveCache); shapes beyond that make theirs per call.
inline constexpr size_t kMaxShapes = 64;

struct ConvGeometry {
  std::array<int64_t, 2> strides{1, 1}, padding{0, 0}, dilations{1, 1};  // symmetric padding
  int64_t groups = 1;
  bool relu = false;
  bool winograd = true;  // where oneDNN has it for the shape (3x3, stride 1, no dilation, one group)
};

// Whether `weight` (float [O, C / groups, kH, kW]), `bias` (undefined or O
// floats) and `g` make a convolution the packed kernels take.
bool PackableConv(const at::Tensor& weight, const at::Tensor& bias, const ConvGeometry& g);

// The output shape of that convolution on an input of `dtype` and shape
// `in` with weights of shape `weight` ([O, C / groups, kH, kW]);
// INVALID_ARGUMENT when it is no float [N, C, H, W] it takes or the kernel
// does not fit.
Result<std::vector<int64_t>> ConvOutputShape(at::ScalarType dtype, at::IntArrayRef in, at::IntArrayRef weight,
                                             const ConvGeometry& g);

}  // namespace inferd::aten
