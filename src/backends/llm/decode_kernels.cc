#include "backends/llm/decode_kernels.h"

#include <algorithm>
#include <cmath>

// Each kernel is compiled three times and the best the CPU runs is bound at load (GCC's ifunc). Not under the
// sanitizers: the dynamic loader runs ifunc resolvers before the sanitizer's runtime is up, and an instrumented
// resolver crashes the program before main (seen with ThreadSanitizer). INFERD_NO_IFUNC: set by CMake for the
// sanitizer builds (the TSan build undefines __SANITIZE_THREAD__ for the system headers' sake).
#if defined(INFERD_NO_IFUNC) || defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define INFERD_KERNEL
#else
#define INFERD_KERNEL __attribute__((target_clones("avx512f", "avx2", "default")))
#endif

namespace inferd::llm::kernels {

// Four partial sums: the loop is bound by loads, not by one chain of adds.
INFERD_KERNEL float Dot(const float* a, const float* b, int64_t n) {
  float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  const int64_t q = n / 4;
#pragma omp simd reduction(+ : s0, s1, s2, s3)
  for (int64_t i = 0; i < q; ++i) {
    s0 += a[i] * b[i];
    s1 += a[q + i] * b[q + i];
    s2 += a[2 * q + i] * b[2 * q + i];
    s3 += a[3 * q + i] * b[3 * q + i];
  }
  for (int64_t i = 4 * q; i < n; ++i) s0 += a[i] * b[i];
  return (s0 + s1) + (s2 + s3);
}

INFERD_KERNEL void Axpy(float a, const float* x, float* y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

void Gemv(const float* w, const float* bias, int64_t rows, int64_t cols, const float* x, int64_t x_stride,
          int64_t batch, float* y, int64_t y_stride) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = w + r * cols;
    const float b = bias ? bias[r] : 0.0f;
    for (int64_t i = 0; i < batch; ++i) y[i * y_stride + r] = Dot(row, x + i * x_stride, cols) + b;
  }
}

INFERD_KERNEL void RmsNorm(const float* x, const float* w, int64_t n, float eps, float* out) {
  float ss = 0;
#pragma omp simd reduction(+ : ss)
  for (int64_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const float inv = 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] = w[i] * (x[i] * inv);
}

INFERD_KERNEL void Rope(float* v, int64_t heads, int64_t d, const float* cos, const float* sin) {
  const int64_t half = d / 2;
  for (int64_t h = 0; h < heads; ++h) {
    float* a = v + h * d;
    float* b = a + half;
#pragma omp simd
    for (int64_t i = 0; i < half; ++i) {
      const float x = a[i], y = b[i];
      a[i] = x * cos[i] - y * sin[i];
      b[i] = y * cos[i] + x * sin[i];
    }
  }
}

void AttendOne(const float* q, const float* k, const float* v, const int64_t* offsets, int64_t ctx, int64_t d,
               float scale, float* scores, float* out) {
  float top = -INFINITY;
  for (int64_t p = 0; p < ctx; ++p) {
    scores[p] = Dot(q, k + offsets[p], d) * scale;
    top = std::max(top, scores[p]);
  }
  float sum = 0;
  for (int64_t p = 0; p < ctx; ++p) {
    scores[p] = std::exp(scores[p] - top);
    sum += scores[p];
  }
  std::fill(out, out + d, 0.0f);
  const float inv = 1.0f / sum;
  for (int64_t p = 0; p < ctx; ++p) Axpy(scores[p] * inv, v + offsets[p], out, d);
}

INFERD_KERNEL void SwiGlu(float* gate, const float* up, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) gate[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

}  // namespace inferd::llm::kernels
