// Int8 matrix products for models quantised at load time (issue 41, first
// step): weights int8 per output channel, activations uint8 per row
// (quantised dynamically, at each call), products accumulated exactly in
// int32, results in FP32:
//   y[i, j] = xs[i] * ws[j] * sum_k (xq[i, k] - zp) * wq[j, k] + bias[j]
// with wq = round(w / ws), ws = max |w[j, :]| / 127, and xq = round(x / xs) +
// zp, xs = max |x[i, :]| / L. The kernel decides L and zp: AVX-512 VNNI and
// the portable code take L = 127, zp = 128 (vpdpbusd adds four u8 x s8
// products into int32, nothing saturates); AVX2 without VNNI takes L = 63,
// zp = 64: vpmaddubsw adds two u8 x s8 products into int16, which 2 x 127 x
// 127 = 32258 never saturates (u8 values up to 127), at the price of one bit
// of the activations' precision. Chosen at run time by the CPU.
//
// Framework-free; the caller splits rows between threads.
// Thread-safety: pure functions; PackedInt8Weights is immutable once packed.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string_view>
#include <vector>

namespace inferd::quant {

// nearbyint(x) within [-levels, levels]; 0 for a NaN (a NaN or infinite
// value, or infinity times a zero scale), whose conversion to an integer
// would be undefined.
inline int32_t RoundToLevel(float x, float levels) {
  const float v = std::nearbyint(x);
  return v == v ? static_cast<int32_t>(std::clamp(v, -levels, levels)) : 0;
}

// W [n, k] (y = x W^T: Linear, Gemm with transB, MatMul's B transposed)
// quantised per output channel and packed for the kernels: blocks of 16
// outputs x 4 values of k (k padded to a multiple of 4, n to 16, with zeros).
struct PackedInt8Weights {
  int64_t n = 0, k = 0;
  int64_t k4 = 0, n16 = 0;        // padded sizes
  std::vector<int8_t> packed;     // [n16 / 16][k4 / 4][16][4]
  std::vector<float> scales;      // [n]: ws
  std::vector<int32_t> row_sums;  // [n16]: sum_k wq[j, k] (the activations' zero point's term)
  int64_t bytes() const { return static_cast<int64_t>(packed.size() + 4 * (scales.size() + row_sums.size())); }
};
PackedInt8Weights PackInt8Weights(const float* w, int64_t n, int64_t k);

// The activations' levels and zero point the chosen kernel needs.
struct ActivationCode {
  int32_t levels = 127;  // L
  int32_t zero_point = 128;
};
ActivationCode ChosenActivationCode();

// x [m, k] (rows x_stride apart) quantised per row for `code`: q [m, k4]
// (padding: the zero point), scales [m].
struct QuantizedRows {
  int64_t m = 0, k4 = 0;
  ActivationCode code;
  std::vector<uint8_t> q;
  std::vector<float> scales;
};
void QuantizeRows(const float* x, int64_t m, int64_t k, int64_t x_stride, ActivationCode code, QuantizedRows* out);

// y [m, n] (rows y_stride apart) = the product above; `bias` may be null.
// x must have been quantised with ChosenActivationCode() and w's k.
void Int8Gemm(const QuantizedRows& x, const PackedInt8Weights& w, const float* bias, float* y, int64_t y_stride);

// A thread's share of one product: rows [row_begin, row_end) of x, output
// blocks [block_begin, block_end) of kInt8Block outputs (clamped to the
// product's; shares that do not overlap write disjoint parts of y).
inline constexpr int64_t kInt8Block = 16;
struct GemmPart {
  int64_t row_begin = 0, row_end = 0;
  int64_t block_begin = 0, block_end = 0;
};
void Int8GemmPart(const QuantizedRows& x, const PackedInt8Weights& w, const float* bias, float* y, int64_t y_stride,
                  const GemmPart& part);

// The kernel Int8Gemm runs: "avx512vnni", "avx2" or "portable" (the best the
// CPU has, or the one the INFERD_INT8_ISA environment variable names when the
// CPU has it: benchmarks measure the AVX2 kernel on a VNNI machine).
std::string_view Int8KernelName();

// Tests: one kernel by name ("avx512vnni", "avx2", "portable") and the code it
// needs; false when this CPU (or build: the sanitizers use the portable one)
// lacks it.
bool ActivationCodeOf(std::string_view isa, ActivationCode* code);
bool QuantizeRowsWith(std::string_view isa, const float* x, int64_t m, int64_t k, int64_t x_stride, ActivationCode code,
                      QuantizedRows* out);
bool Int8GemmWith(std::string_view isa, const QuantizedRows& x, const PackedInt8Weights& w, const float* bias, float* y,
                  int64_t y_stride);

}  // namespace inferd::quant
