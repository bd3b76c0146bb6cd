// Int8 2-D convolutions for ONNX and TorchScript models quantised at load time (parameter
// `quantization: "int8"`, docs/quantization.md), on oneDNN's int8
// convolution (jit x8s8s32x: AVX-512 VNNI, AVX-512, AVX2): the weights int8
// per output channel, quantised and packed once; the input quantised per call
// and per tensor (unsigned 8 bits over [0, max] when it holds no negative
// value -- a ReLU's output, most layers of a CNN -- else signed 8 bits over
// [-max|x|, max|x|]), the int32 products scaled back to float by a per-call
// scale per output channel, bias and a fused ReLU inside the primitive.
// Inputs and outputs are plain float NCHW ATen tensors.
//
// A primitive is made per input shape and signedness on first use and kept
// (up to kMaxShapes: conv_geometry.h).
// Thread-safety: Run may be called concurrently.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/aten/conv_geometry.h"
#include "core/status.h"

namespace inferd::aten {

class Int8Conv2d {
 public:
  // `weight`: float [O, C / groups, kH, kW]; `bias`: undefined or O floats;
  // `g.winograd` is ignored. nullopt when oneDNN takes no such convolution.
  static std::optional<std::shared_ptr<const Int8Conv2d>> Make(const at::Tensor& weight, const at::Tensor& bias,
                                                               const ConvGeometry& g);
  ~Int8Conv2d();

  // The weights' bytes as int8 (values and scales) and as float.
  int64_t bytes() const;
  int64_t float_bytes() const;
  // x: float [N, C, H, W] with H, W at least the (dilated) kernel after padding.
  Result<at::Tensor> Run(const at::Tensor& x) const;
  // The implementation oneDNN chose for an input of `shape` (tests, logs).
  std::string ImplFor(const std::vector<int64_t>& shape, bool signed_input) const;

  struct Impl;

 private:
  explicit Int8Conv2d(std::unique_ptr<Impl> impl);
  // A shape oneDNN has no int8 kernel for: ATen's FP32 convolution of the dequantised weights.
  at::Tensor FallBack(const at::Tensor& x) const;
  std::unique_ptr<Impl> impl_;
};

}  // namespace inferd::aten
