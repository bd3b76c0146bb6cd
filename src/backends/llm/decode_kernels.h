// Kernels of the decoder's small steps (decode tokens, speculative drafts, short
// prompts: at most 64 tokens in all) on raw FP32 buffers: the matrix-vector products that read the weights, and the
// small per-token work around them (RMSNorm, rotary positions, attention of
// a token's query heads over the paged cache) that op-by-op ATen calls made cost more
// than the arithmetic. Compiled for AVX-512, AVX2 and plain x86-64, chosen
// at run time (target_clones). ATen-free; the caller splits rows between
// threads.
//
// Thread-safety: pure functions of their arguments.
#pragma once

#include <cstdint>
#include <string_view>

namespace inferd::llm::kernels {

// y += a * x over n floats.
void Axpy(float a, const float* x, float* y, int64_t n);
// y += sum_j a[j] * x[j * n ...] over n floats, for j < k (k rows of x, row-major [k, n]): a LoRA update's expand
// (a = x A^T of one row, x = scale * B^T), y read and written once per chunk instead of once per row of x.
void AddRows(const float* a, int64_t k, const float* x, int64_t n, float* y);

// For every b < batch and r < rows: y[b * y_stride + r] = W[r, :] . x[b * x_stride, ...]
// (+ bias[r] when bias is not null), W row-major [rows, cols], for a batch of
// 1-64 sequences: W's rows are taken a few at a time and multiplied with every
// sequence's x while they are in cache (register tiles of rows x sequences,
// the next tile's rows prefetched), so W is read from memory once per call and
// no packed copy is made. AVX-512, AVX2+FMA or SSE, chosen by the CPU.
void GemmSmall(const float* w, const float* bias, int64_t rows, int64_t cols, const float* x, int64_t x_stride,
               int64_t batch, float* y, int64_t y_stride);

// Weight-only int8 (GGUF's Q8_0 layout, with FP32 scales): each row of W in
// blocks of 32 values, q = round(w / s) in [-127, 127] with s = max|w| / 127
// per block. `cols` must be a multiple of kQ8Block.
inline constexpr int64_t kQ8Block = 32;
void QuantizeQ8(const float* w, int64_t rows, int64_t cols, int8_t* q, float* scales);
// The FP32 values back (w[i] = q[i] * its block's scale).
void DequantizeQ8(const int8_t* q, const float* scales, int64_t rows, int64_t cols, float* w);

// GemmSmall over Q8 weights: q [rows, cols] and scales [rows, cols / 32];
// the blocks are widened to FP32 in registers (read a quarter of the bytes).
void GemmSmallQ8(const int8_t* q, const float* scales, const float* bias, int64_t rows, int64_t cols, const float* x,
                 int64_t x_stride, int64_t batch, float* y, int64_t y_stride);
// Tests: GemmSmallQ8 with one instruction set ("avx512", "avx2", "portable");
// false when this CPU (or build: the sanitizers use the portable one) lacks it.
bool GemmSmallQ8With(std::string_view isa, const int8_t* q, const float* scales, const float* bias, int64_t rows,
                     int64_t cols, const float* x, int64_t x_stride, int64_t batch, float* y, int64_t y_stride);

// bfloat16 storage: the upper 16 bits of each FP32 value (rounded to the
// nearest, ties to even; NaN stays NaN), half the bytes of FP32 with FP32's
// range; widened back by a 16-bit shift.
void ToBf16(const float* w, int64_t n, uint16_t* out);
void FromBf16(const uint16_t* w, int64_t n, float* out);
// GemmSmall over bf16 weights [rows, cols], widened to FP32 in registers (read
// half the bytes). `cols` must be a multiple of kBf16Cols.
inline constexpr int64_t kBf16Cols = 16;
void GemmSmallBf16(const uint16_t* w, const float* bias, int64_t rows, int64_t cols, const float* x, int64_t x_stride,
                   int64_t batch, float* y, int64_t y_stride);

// out = w * x / sqrt(mean(x^2) + eps) over n floats (out may be x).
void RmsNorm(const float* x, const float* w, int64_t n, float eps, float* out);

// Hugging Face's rotary embedding (rotate_half: element i pairs with i + D/2)
// of `heads` vectors of D floats, in place; cos and sin hold D/2 values.
void Rope(float* v, int64_t heads, int64_t d, const float* cos, const float* sin);

// The `group` query heads that share one key/value head (grouped-query attention; 1 for multi-head) over `ctx`
// cached positions: for each head g, out[g * d ...] = softmax(q_g . k_p * scale) weighted sum of v_p, where the
// keys and values of position p are at k + offsets[p] and v + offsets[p], q_g at q + g * d. Each key and value
// row is read once for the whole group. `scores` holds group * ctx floats (scratch).
void AttendGroup(const float* q, int64_t group, const float* k, const float* v, const int64_t* offsets, int64_t ctx,
                 int64_t d, float scale, float* scores, float* out);

// gate[i] = silu(gate[i]) * up[i] over n floats (Llama's SwiGLU).
void SwiGlu(float* gate, const float* up, int64_t n);

}  // namespace inferd::llm::kernels
