// What a Conv node with constant weights is, for the kernels that pack them
// at load (mkldnn.cc's oneDNN FP32 convolution, int8_ops.cc's int8 one).
// Thread-safety: a pure function (the node is read on the loading thread).
#pragma once

#include <ATen/ATen.h>

#include <optional>

#include "backends/onnx/kernel.h"
#include "backends/onnx/ops/dnnl_conv.h"

namespace inferd::onnxexec::ops {

struct ConstantConv {
  at::Tensor weight;  // float [O, C / groups, kH, kW]
  at::Tensor bias;    // undefined, or the constant bias input
  ConvGeometry geometry;
};

// A 2-D Conv with a float constant weight (and constant bias, if any),
// symmetric explicit or VALID padding and in-range attributes; nullopt for
// anything else (the standard kernel then runs it, and says what is wrong).
std::optional<ConstantConv> ConstantConvOf(const NodeInfo& n, bool relu, bool winograd);

}  // namespace inferd::onnxexec::ops
