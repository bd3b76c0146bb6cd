// TorchScript models quantised at load time (model parameter `quantization:
// "int8"`, docs/quantization.md). In a frozen module's forward graph (and the
// blocks inside it), each aten::linear whose weight is a constant float
// matrix and whose bias is a constant vector or None, and each aten::matmul
// of an input by a constant float matrix, becomes inferd::int8_linear(x,
// <packed weights>): the int8 product of aten/int8_linear.h (weights int8
// per output channel, activations per row). Each 2-D convolution with a
// constant weight, bias and geometry (aten::conv2d from scripted modules,
// aten::_convolution from traced ones, not transposed) becomes
// inferd::int8_conv2d(x, <packed weights>) (aten/int8_conv.h: oneDNN's int8
// convolution), with a ReLU that is its only user fused in; its output is
// channels last (the layout the next convolution reads), or NCHW-contiguous
// when the graph has an aten::view anywhere (a view of a channels-last tensor
// can fail where FP32's succeeded). Everything else stays FP32. The FP32 weights' constants are
// dropped from the graph. The accuracy guard (manager/quantization_guard.h)
// judges the result.
//
// inferd::int8_linear, inferd::int8_conv2d and their weight classes are
// registered into libtorch's process-wide operator and class registries on
// the first call, and stay registered for the process.
//
// Thread-safety: call on the loading thread, before the module serves (and
// under the backend's JIT lock).
#pragma once

#include <torch/script.h>

#include <cstdint>

namespace inferd::torchscript {

struct Int8Rewrite {
  int layers = 0;               // products and convolutions replaced
  int64_t float_bytes = 0;      // their weights' bytes in FP32
  int64_t quantized_bytes = 0;  // packed
};

Int8Rewrite RewriteLinearsToInt8(torch::jit::Module& frozen);

}  // namespace inferd::torchscript
