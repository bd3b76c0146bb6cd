// The decoder's projection products (aten_decoder.cc): y = W x (+ bias) for a
// step's rows, over W in FP32 (an ATen tensor) or stored smaller than FP32
// (PackedMatrix: weight-only int8 blocks, or bfloat16 values), on the
// register tiles of decode_kernels.h for up to kTiledBatch rows and ATen's
// GEMM beyond. W's rows are split between the calling thread's intra-op
// threads.
//
// Thread-safety: PackedMatrix is immutable once made; the products keep no
// state.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace inferd::llm {

// int8 blocks with scales (decode_kernels.h's Q8), or bfloat16 values (`bf16`
// not empty); empty when the FP32 tensor serves.
struct PackedMatrix {
  int64_t rows = 0, cols = 0;
  std::vector<int8_t> q;
  std::vector<float> scales;
  std::vector<uint16_t> bf16;
  bool empty() const { return rows == 0; }
  bool is_bf16() const { return !bf16.empty(); }
};

enum class Packing { kInt8, kBf16 };

// `w` packed, its FP32 copy released (unless it is `keep`: the embedding a
// tied lm_head shares); empty when its width does not fit the packing (a
// multiple of kQ8Block for int8, of kBf16Cols for bf16): it stays FP32.
PackedMatrix Pack(at::Tensor& w, const at::Tensor& keep, Packing packing);

// Rows up to which the register tiles run; ATen's GEMM past them, where its
// packed blocks pay off. Measured on bench_llama, decode tokens/s: 16
// sequences, ATen's addmm 540 (a third of it packing W: OpenBLAS's
// sgemm_incopy), the tiles 750-850; 1 sequence, a row-by-row matrix-vector
// product 242, the tiles (4 rows at once, the next tile prefetched) 254.
inline constexpr int64_t kTiledBatch = 64;

// y[b, :rows] = W x[b] (+ b) for `batch` rows of x (row-major, W's width);
// W is `packed` when it is not empty, else `w`.
void Linear(const at::Tensor& w, const PackedMatrix& packed, const at::Tensor& b, const float* x, int64_t batch,
            float* y);

// x [n, in] through a projection: ATen's linear, or Linear when W is packed
// (its FP32 copy gone).
at::Tensor Project(const at::Tensor& x, const at::Tensor& w, const PackedMatrix& packed, const at::Tensor& b);

}  // namespace inferd::llm
