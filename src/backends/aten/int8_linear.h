// Int8 products for models quantised at load time (model parameter
// `quantization: "int8"`, docs/quantization.md; the ONNX executor's MatMul /
// Gemm and TorchScript's aten::linear share them): a constant float weight
// quantised per output channel and packed once (quant/int8_gemm.h), the
// activations quantised per row at each call, the product accumulated in
// int32 and scaled back to float, bias and GELU applied after.
//
// Thread-safety: immutable once made; Run may be called concurrently. Threads:
// the calling thread's intra-op thread count (ATen's, at::get_num_threads): rows
// split between them, or the outputs when there are few rows.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <optional>

#include "core/status.h"
#include "quant/int8_gemm.h"

namespace inferd::aten {

// Applied to the product after the bias.
enum class Int8Epilogue { kNone, kGeluErf };

class Int8Linear {
 public:
  // `w`: float [K, N], or [N, K] when `transposed`; `bias`: undefined or N
  // floats. nullopt when the weight is not such a matrix.
  static std::optional<std::shared_ptr<const Int8Linear>> Make(const at::Tensor& w, bool transposed,
                                                               const at::Tensor& bias, Int8Epilogue epilogue);
  int64_t k() const { return w_.k; }
  int64_t n() const { return w_.n; }
  // The packed weights' bytes (int8 values, scales, row sums) and the float
  // weights' they replace.
  int64_t bytes() const { return w_.bytes(); }
  int64_t float_bytes() const { return 4 * w_.n * w_.k; }

  // x: float [M, K], M >= 1 (any strides) -> float [M, N].
  Result<at::Tensor> Run(const at::Tensor& x) const;

 private:
  quant::PackedInt8Weights w_;
  std::vector<float> bias_;
  Int8Epilogue epilogue_ = Int8Epilogue::kNone;
};

}  // namespace inferd::aten
