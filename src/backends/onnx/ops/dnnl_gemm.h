// Matrix products on oneDNN's matmul primitive, called directly (libdnnl is
// the library libtorch's own oneDNN kernels run on): inputs and outputs stay
// plain row-major ATen tensors (no conversion to and from oneDNN's opaque
// layout around every call), constant weights are packed once at load into
// the layout the primitive asks for, and bias and GELU run inside the
// primitive as post-ops.
//
// A primitive is made for each new input shape on first use (a JIT compile,
// ~0.1-0.3 ms) and kept, up to kMaxShapes per object; shapes beyond that run
// on a primitive made for the call, which oneDNN's own primitive cache
// (1024 per process, ONEDNN_PRIMITIVE_CACHE_CAPACITY) makes ~3 us for a
// shape it has seen (traffic of many sequence lengths).
//
// dnnl's headers stay in dnnl_gemm.cc.
// Thread-safety: Run may be called concurrently (each call has its own
// stream and scratchpad; the shape cache is under a mutex). Threads: the
// calling thread's OpenMP thread count (aten::SetIntraOpThreads).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <optional>

#include "backends/aten/conv_geometry.h"  // kMaxShapes
#include "core/status.h"

namespace inferd::onnxexec::ops {

using aten::kMaxShapes;

// What runs on the product before it is stored.
enum class Epilogue { kNone, kGeluErf };

// y [M, N] = epilogue(x [M, K] W [K, N] + bias), W and bias constants.
class PackedGemm {
 public:
  // `w`: float [K, N], or [N, K] when `transposed`; `bias`: undefined or N
  // floats. nullopt when oneDNN takes no such product (the caller keeps its
  // own kernel).
  static std::optional<std::shared_ptr<const PackedGemm>> Make(const at::Tensor& w, bool transposed,
                                                               const at::Tensor& bias, Epilogue epilogue);
  ~PackedGemm();

  int64_t k() const;
  int64_t n() const;
  // x: float [M, K], M >= 1 (any strides).
  Result<at::Tensor> Run(const at::Tensor& x) const;

  struct Impl;

 private:
  explicit PackedGemm(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// a [B..., M, K] x b [B..., K, N] for float tensors of one rank (>= 2) whose
// batch dimensions are equal (no broadcasting) and non-empty: one batched
// primitive, strided inputs read in place where oneDNN takes their strides.
class BatchedMatMul {
 public:
  BatchedMatMul();
  ~BatchedMatMul();
  // nullopt when the operands are not such (the caller runs its own kernel).
  std::optional<Result<at::Tensor>> Run(const at::Tensor& a, const at::Tensor& b) const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace inferd::onnxexec::ops
