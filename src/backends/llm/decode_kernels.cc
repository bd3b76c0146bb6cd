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

namespace {

// A tile of R rows of W times S sequences' x: out[r][s] = W[r] . x[s], with
// R * S vector accumulators of V (a GCC vector of floats).
typedef float V16 __attribute__((vector_size(64)));
typedef float V8 __attribute__((vector_size(32)));
typedef float V4 __attribute__((vector_size(16)));

// Horizontal sums by halves (shuffles and vector adds, not a scalar chain).
__attribute__((always_inline)) inline float HSum(V4 v) { return (v[0] + v[1]) + (v[2] + v[3]); }
__attribute__((always_inline)) inline float HSum(V8 v) {
  return HSum(V4{__builtin_shufflevector(v, v, 0, 1, 2, 3)} + V4{__builtin_shufflevector(v, v, 4, 5, 6, 7)});
}
__attribute__((always_inline)) inline float HSum(V16 v) {
  return HSum(V8{__builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7)} +
              V8{__builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15)});
}

// `prefetch`: the rows the next tile will read (the first pass over a tile
// brings its rows from memory; asking early overlaps that with the arithmetic).
template <typename V, int R, int S>
__attribute__((always_inline)) inline void Tile(const float* w, int64_t cols, const float* x, int64_t x_stride,
                                                float (&out)[R][S], const float* prefetch = nullptr) {
  constexpr int64_t L = sizeof(V) / sizeof(float);
  V acc[R][S];
  for (int r = 0; r < R; ++r)
    for (int s = 0; s < S; ++s) acc[r][s] = V{};
  int64_t k = 0;
  for (; k + L <= cols; k += L) {
    V wv[R];
    for (int r = 0; r < R; ++r) __builtin_memcpy(&wv[r], w + r * cols + k, sizeof(V));
    if (prefetch != nullptr) {
      for (int r = 0; r < R; ++r) __builtin_prefetch(prefetch + r * cols + k + 64);
    }
    for (int s = 0; s < S; ++s) {
      V xv;
      __builtin_memcpy(&xv, x + s * x_stride + k, sizeof(V));
      for (int r = 0; r < R; ++r) acc[r][s] += wv[r] * xv;
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int s = 0; s < S; ++s) {
      float t = HSum(acc[r][s]);
      for (int64_t i = k; i < cols; ++i) t += w[r * cols + i] * x[s * x_stride + i];
      out[r][s] = t;
    }
  }
}

template <typename V, int R, int S>
__attribute__((always_inline)) inline void TiledGemm(const float* w, const float* bias, int64_t rows, int64_t cols,
                                                     const float* x, int64_t x_stride, int64_t batch, float* y,
                                                     int64_t y_stride) {
  int64_t r0 = 0;
  for (; r0 + R <= rows; r0 += R) {
    const float* wr = w + r0 * cols;
    int64_t s0 = 0;
    for (; s0 + S <= batch; s0 += S) {
      float out[R][S];
      Tile<V, R, S>(wr, cols, x + s0 * x_stride, x_stride, out,
                    s0 == 0 && r0 + 2 * R <= rows ? wr + R * cols : nullptr);
      for (int r = 0; r < R; ++r)
        for (int s = 0; s < S; ++s) y[(s0 + s) * y_stride + r0 + r] = out[r][s] + (bias ? bias[r0 + r] : 0.0f);
    }
    for (; s0 < batch; ++s0) {
      float out[R][1];
      Tile<V, R, 1>(wr, cols, x + s0 * x_stride, x_stride, out);
      for (int r = 0; r < R; ++r) y[s0 * y_stride + r0 + r] = out[r][0] + (bias ? bias[r0 + r] : 0.0f);
    }
  }
  for (; r0 < rows; ++r0) {
    for (int64_t s0 = 0; s0 < batch; ++s0) {
      float out[1][1];
      Tile<V, 1, 1>(w + r0 * cols, cols, x + s0 * x_stride, x_stride, out);
      y[s0 * y_stride + r0] = out[0][0] + (bias ? bias[r0] : 0.0f);
    }
  }
}

// Chosen by hand rather than by target_clones: the register tiles differ (32 registers with AVX-512, 16 without).
#if !defined(INFERD_NO_IFUNC) && !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
__attribute__((target("avx512f"))) void GemmAvx512(const float* w, const float* bias, int64_t rows, int64_t cols,
                                                   const float* x, int64_t x_stride, int64_t batch, float* y,
                                                   int64_t y_stride) {
  TiledGemm<V16, 4, 4>(w, bias, rows, cols, x, x_stride, batch, y, y_stride);
}
__attribute__((target("avx2,fma"))) void GemmAvx2(const float* w, const float* bias, int64_t rows, int64_t cols,
                                                  const float* x, int64_t x_stride, int64_t batch, float* y,
                                                  int64_t y_stride) {
  TiledGemm<V8, 4, 2>(w, bias, rows, cols, x, x_stride, batch, y, y_stride);
}
#endif

void GemmSse(const float* w, const float* bias, int64_t rows, int64_t cols, const float* x, int64_t x_stride,
             int64_t batch, float* y, int64_t y_stride) {
  TiledGemm<V4, 2, 2>(w, bias, rows, cols, x, x_stride, batch, y, y_stride);
}

using GemmFn = void (*)(const float*, const float*, int64_t, int64_t, const float*, int64_t, int64_t, float*, int64_t);

GemmFn PickGemm() {
#if !defined(INFERD_NO_IFUNC) && !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return GemmAvx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return GemmAvx2;
#endif
  return GemmSse;
}

}  // namespace

void GemmSmall(const float* w, const float* bias, int64_t rows, int64_t cols, const float* x, int64_t x_stride,
               int64_t batch, float* y, int64_t y_stride) {
  static const GemmFn fn = PickGemm();
  fn(w, bias, rows, cols, x, x_stride, batch, y, y_stride);
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
