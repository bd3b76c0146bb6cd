// 2-D convolutions on oneDNN's convolution primitive, called directly (as
// dnnl_gemm.h does for matrix products): the weights are packed once per
// layout a primitive asks for, 3x3 stride-1 convolutions run as Winograd
// convolutions where oneDNN has them (jit_wino on AVX-512: 30-45% less time
// than direct convolution for ResNet-18's 3x3 layers on the 2-core VM),
// bias and a fused ReLU run inside the primitive. Inputs and outputs are
// plain NCHW ATen tensors; the reorders into and out of oneDNN's blocked
// layout happen inside the call.
//
// A primitive is made for each new input shape on first use and kept, up to
// kMaxShapes (dnnl_gemm.h) per object. Memory: the constant weights are kept
// once as they are and once per layout a primitive asks for (Winograd's
// transformed weights are 1.8x the plain size with the 2x3 tiles oneDNN picks
// at batch 1 and 4x with the 4x3 tiles at batch 8).
// Thread-safety: Run may be called concurrently.
#pragma once

#include <ATen/ATen.h>

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/aten/conv_geometry.h"
#include "backends/onnx/ops/dnnl_gemm.h"
#include "core/status.h"

namespace inferd::onnxexec::ops {

using aten::ConvGeometry;
using aten::ConvOutputShape;
using aten::PackableConv;

class PackedConv2d {
 public:
  // `weight`: float [O, C / groups, kH, kW]; `bias`: undefined or O floats.
  // nullopt when oneDNN takes no such convolution.
  static std::optional<std::shared_ptr<const PackedConv2d>> Make(const at::Tensor& weight, const at::Tensor& bias,
                                                                 const ConvGeometry& g);
  ~PackedConv2d();

  int64_t in_channels() const;
  // x: float [N, C, H, W] with H, W at least the (dilated) kernel after padding.
  Result<at::Tensor> Run(const at::Tensor& x) const;
  // The implementation oneDNN chose for an input of `shape` (tests, logs).
  std::string ImplFor(const std::vector<int64_t>& shape) const;

  struct Impl;

 private:
  explicit PackedConv2d(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// 2-D max pooling of float NCHW tensors on oneDNN's pooling primitive
// (ATen's NCHW max_pool2d took 3.2 ms for ResNet-18's 1x64x112x112 on the
// 2-core VM, a fifth of the whole network). Symmetric padding, no dilation,
// floor rounding; nullopt from Run for anything else (the caller's kernel).
class MaxPool2d {
 public:
  // kernel and strides >= 1, 0 <= 2 * padding <= kernel (the caller checks).
  MaxPool2d(std::array<int64_t, 2> kernel, std::array<int64_t, 2> strides, std::array<int64_t, 2> padding);
  ~MaxPool2d();
  std::optional<Result<at::Tensor>> Run(const at::Tensor& x) const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace inferd::onnxexec::ops
