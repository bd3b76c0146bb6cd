#include "backends/llm/decode_kernels.h"

#include <immintrin.h>

#include <algorithm>
#include <bit>
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

INFERD_KERNEL void Axpy(float a, const float* x, float* y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

INFERD_KERNEL void AddRows(const float* a, int64_t k, const float* x, int64_t n, float* y) {
  constexpr int64_t kChunk = 256;  // y's chunk stays in registers / L1 while the k rows of x add to it
  for (int64_t c0 = 0; c0 < n; c0 += kChunk) {
    const int64_t len = std::min(kChunk, n - c0);
    float* yc = y + c0;
    for (int64_t j = 0; j < k; ++j) {
      const float aj = a[j];
      const float* xj = x + j * n + c0;
#pragma omp simd
      for (int64_t i = 0; i < len; ++i) yc[i] += aj * xj[i];
    }
  }
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

// One tile of R rows x N sequences from sequence s0, bias added, into y.
template <typename V, int R, int N>
__attribute__((always_inline)) inline void StoreTile(const float* wr, const float* bias, int64_t r0, int64_t cols,
                                                     const float* x, int64_t x_stride, int64_t s0, float* y,
                                                     int64_t y_stride, const float* prefetch) {
  float out[R][N];
  Tile<V, R, N>(wr, cols, x + s0 * x_stride, x_stride, out, prefetch);
  for (int r = 0; r < R; ++r)
    for (int s = 0; s < N; ++s) y[(s0 + s) * y_stride + r0 + r] = out[r][s] + (bias ? bias[r0 + r] : 0.0f);
}

// Sequences in tiles of S, the rest in one narrower tile (3, 2 or 1 wide: a 2-sequence step costs about what a
// 1-sequence one does, as a speculative verification wants), the first tile of each row group prefetching the next
// group's rows (1 sequence, bench_llama's matrices, 4 copies so the last-level cache cannot hold them: 7.0-7.5 ms
// per step's products without, 6.3-6.7 with).
template <typename V, int R, int S>
__attribute__((always_inline)) inline void TiledGemm(const float* w, const float* bias, int64_t rows, int64_t cols,
                                                     const float* x, int64_t x_stride, int64_t batch, float* y,
                                                     int64_t y_stride) {
  int64_t r0 = 0;
  for (; r0 + R <= rows; r0 += R) {
    const float* wr = w + r0 * cols;
    const float* next = r0 + 2 * R <= rows ? wr + R * cols : nullptr;
    int64_t s0 = 0;
    for (; s0 + S <= batch; s0 += S)
      StoreTile<V, R, S>(wr, bias, r0, cols, x, x_stride, s0, y, y_stride, s0 == 0 ? next : nullptr);
    const int64_t rest = batch - s0;
    const float* pf = s0 == 0 ? next : nullptr;
    if constexpr (S > 3) {
      if (rest == 3) {
        StoreTile<V, R, 3>(wr, bias, r0, cols, x, x_stride, s0, y, y_stride, pf);
        continue;
      }
    }
    if constexpr (S > 2) {
      if (rest == 2) {
        StoreTile<V, R, 2>(wr, bias, r0, cols, x, x_stride, s0, y, y_stride, pf);
        continue;
      }
    }
    if (rest == 1) StoreTile<V, R, 1>(wr, bias, r0, cols, x, x_stride, s0, y, y_stride, pf);
  }
  for (; r0 < rows; ++r0) {
    for (int64_t s0 = 0; s0 < batch; ++s0)
      StoreTile<V, 1, 1>(w + r0 * cols, bias, r0, cols, x, x_stride, s0, y, y_stride, nullptr);
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

// Q8: R rows' blocks of 32 widened to FP32 and scaled once, then used for S sequences.
template <typename V, typename I8, int R, int S>
__attribute__((always_inline)) inline void TileQ8(const int8_t* q, const float* scales, int64_t cols, const float* x,
                                                  int64_t x_stride, float (&out)[R][S], const int8_t* prefetch) {
  constexpr int64_t L = sizeof(V) / sizeof(float);
  constexpr int64_t N = kQ8Block / L;
  const int64_t blocks = cols / kQ8Block;
  V acc[R][S];
  for (int r = 0; r < R; ++r)
    for (int s = 0; s < S; ++s) acc[r][s] = V{};
  for (int64_t b = 0; b < blocks; ++b) {
    V wf[R][N];
    for (int r = 0; r < R; ++r) {
      const float sc = scales[r * blocks + b];
      for (int64_t n = 0; n < N; ++n) {
        I8 t;
        __builtin_memcpy(&t, q + r * cols + b * kQ8Block + n * L, sizeof(I8));
        // Through int32 lanes: GCC widens int8 -> int32 -> float with vector instructions (vpmovsxbd,
        // vcvtdq2ps); a direct int8 -> float conversion came out as one scalar conversion per value.
        typedef int32_t I32 __attribute__((vector_size(sizeof(V))));
        wf[r][n] = __builtin_convertvector(__builtin_convertvector(t, I32), V) * sc;
      }
    }
    if (prefetch != nullptr) {
      for (int r = 0; r < R; ++r) __builtin_prefetch(prefetch + r * cols + b * kQ8Block + 256);
    }
    for (int s = 0; s < S; ++s) {
      for (int64_t n = 0; n < N; ++n) {
        V xv;
        __builtin_memcpy(&xv, x + s * x_stride + b * kQ8Block + n * L, sizeof(V));
        for (int r = 0; r < R; ++r) acc[r][s] += wf[r][n] * xv;
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int s = 0; s < S; ++s) out[r][s] = HSum(acc[r][s]);
}

template <typename V, typename I8, int R, int S>
__attribute__((always_inline)) inline void TiledGemmQ8(const int8_t* q, const float* scales, const float* bias,
                                                       int64_t rows, int64_t cols, const float* x, int64_t x_stride,
                                                       int64_t batch, float* y, int64_t y_stride) {
  const int64_t blocks = cols / kQ8Block;
  auto put = [&](int64_t r, int64_t s, float v) { y[s * y_stride + r] = v + (bias ? bias[r] : 0.0f); };
  int64_t r0 = 0;
  for (; r0 + R <= rows; r0 += R) {
    const int8_t* qr = q + r0 * cols;
    const float* sr = scales + r0 * blocks;
    int64_t s0 = 0;
    for (; s0 + S <= batch; s0 += S) {
      float out[R][S];
      TileQ8<V, I8, R, S>(qr, sr, cols, x + s0 * x_stride, x_stride, out,
                          s0 == 0 && r0 + 2 * R <= rows ? qr + R * cols : nullptr);
      for (int r = 0; r < R; ++r)
        for (int s = 0; s < S; ++s) put(r0 + r, s0 + s, out[r][s]);
    }
    for (; s0 < batch; ++s0) {
      float out[R][1];
      TileQ8<V, I8, R, 1>(qr, sr, cols, x + s0 * x_stride, x_stride, out, nullptr);
      for (int r = 0; r < R; ++r) put(r0 + r, s0, out[r][0]);
    }
  }
  for (; r0 < rows; ++r0) {
    for (int64_t s0 = 0; s0 < batch; ++s0) {
      float out[1][1];
      TileQ8<V, I8, 1, 1>(q + r0 * cols, scales + r0 * blocks, cols, x + s0 * x_stride, x_stride, out, nullptr);
      put(r0, s0, out[0][0]);
    }
  }
}

typedef int8_t I8x16 __attribute__((vector_size(16)));
typedef int8_t I8x8 __attribute__((vector_size(8)));
typedef int8_t I8x4 __attribute__((vector_size(4)));

#if !defined(INFERD_NO_IFUNC) && !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
// AVX-512 by intrinsics: GCC 12 turns the vector-extension widening of int8 lanes into one scalar conversion per
// value (measured: 55 tokens/s at 1 sequence against 258 for FP32); vpmovsxbd + vcvtdq2ps do 16 at once.
__attribute__((target("avx512f"))) inline __m512 Widen16(const int8_t* p, __m512 scale) {
  return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)))),
                       scale);
}

// Rows [r0, r0 + 4) x sequences [s0, s0 + S).
template <int S>
__attribute__((target("avx512f"))) void Q8Tile512(const int8_t* q, const float* scales, const float* bias, int64_t r0,
                                                  int64_t cols, const float* x, int64_t x_stride, int64_t s0, float* y,
                                                  int64_t y_stride, const int8_t* prefetch) {
  const int64_t blocks = cols / kQ8Block;
  __m512 acc[4][S];
  for (int r = 0; r < 4; ++r)
    for (int s = 0; s < S; ++s) acc[r][s] = _mm512_setzero_ps();
  const int8_t* qr = q + r0 * cols;
  const float* sr = scales + r0 * blocks;
  for (int64_t b = 0; b < blocks; ++b) {
    __m512 w[4][2];
    for (int r = 0; r < 4; ++r) {
      const __m512 sc = _mm512_set1_ps(sr[r * blocks + b]);
      w[r][0] = Widen16(qr + r * cols + b * kQ8Block, sc);
      w[r][1] = Widen16(qr + r * cols + b * kQ8Block + 16, sc);
    }
    if (prefetch != nullptr) {
      for (int r = 0; r < 4; ++r) __builtin_prefetch(prefetch + r * cols + b * kQ8Block + 256);
    }
    for (int s = 0; s < S; ++s) {
      const float* xs = x + (s0 + s) * x_stride + b * kQ8Block;
      const __m512 x0 = _mm512_loadu_ps(xs), x1 = _mm512_loadu_ps(xs + 16);
      for (int r = 0; r < 4; ++r) {
        acc[r][s] = _mm512_fmadd_ps(w[r][0], x0, acc[r][s]);
        acc[r][s] = _mm512_fmadd_ps(w[r][1], x1, acc[r][s]);
      }
    }
  }
  for (int r = 0; r < 4; ++r) {
    for (int s = 0; s < S; ++s) {
      y[(s0 + s) * y_stride + r0 + r] = _mm512_reduce_add_ps(acc[r][s]) + (bias ? bias[r0 + r] : 0.0f);
    }
  }
}

__attribute__((target("avx512f"))) void GemmQ8Avx512(const int8_t* q, const float* scales, const float* bias,
                                                     int64_t rows, int64_t cols, const float* x, int64_t x_stride,
                                                     int64_t batch, float* y, int64_t y_stride) {
  int64_t r0 = 0;
  for (; r0 + 4 <= rows; r0 += 4) {
    const int8_t* next = r0 + 8 <= rows ? q + (r0 + 4) * cols : nullptr;
    int64_t s0 = 0;
    for (; s0 + 4 <= batch; s0 += 4) {
      Q8Tile512<4>(q, scales, bias, r0, cols, x, x_stride, s0, y, y_stride, s0 == 0 ? next : nullptr);
    }
    switch (batch - s0) {
      case 3:
        Q8Tile512<3>(q, scales, bias, r0, cols, x, x_stride, s0, y, y_stride, s0 == 0 ? next : nullptr);
        break;
      case 2:
        Q8Tile512<2>(q, scales, bias, r0, cols, x, x_stride, s0, y, y_stride, s0 == 0 ? next : nullptr);
        break;
      case 1:
        Q8Tile512<1>(q, scales, bias, r0, cols, x, x_stride, s0, y, y_stride, s0 == 0 ? next : nullptr);
        break;
      default:
        break;
    }
  }
  if (r0 < rows) {  // the last rows (fewer than 4): the portable tiles
    TiledGemmQ8<V16, I8x16, 1, 1>(q + r0 * cols, scales + r0 * (cols / kQ8Block), bias ? bias + r0 : nullptr, rows - r0,
                                  cols, x, x_stride, batch, y + r0, y_stride);
  }
}

// AVX2 by intrinsics too (vpmovsxbd + vcvtdq2ps on 8 lanes), tiles of 2 rows x 2 sequences (16 registers).
__attribute__((target("avx2,fma"))) inline __m256 Widen8(const int8_t* p, __m256 scale) {
  return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)))),
                       scale);
}

__attribute__((target("avx2,fma"))) inline float HSum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

template <int S>
__attribute__((target("avx2,fma"))) void Q8Tile256(const int8_t* q, const float* scales, const float* bias, int64_t r0,
                                                   int64_t cols, const float* x, int64_t x_stride, int64_t s0, float* y,
                                                   int64_t y_stride) {
  const int64_t blocks = cols / kQ8Block;
  __m256 acc[2][S];
  for (int r = 0; r < 2; ++r)
    for (int s = 0; s < S; ++s) acc[r][s] = _mm256_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    __m256 w[2][4];
    for (int r = 0; r < 2; ++r) {
      const __m256 sc = _mm256_set1_ps(scales[(r0 + r) * blocks + b]);
      for (int n = 0; n < 4; ++n) w[r][n] = Widen8(q + (r0 + r) * cols + b * kQ8Block + n * 8, sc);
    }
    for (int s = 0; s < S; ++s) {
      const float* xs = x + (s0 + s) * x_stride + b * kQ8Block;
      for (int n = 0; n < 4; ++n) {
        const __m256 xv = _mm256_loadu_ps(xs + n * 8);
        for (int r = 0; r < 2; ++r) acc[r][s] = _mm256_fmadd_ps(w[r][n], xv, acc[r][s]);
      }
    }
  }
  for (int r = 0; r < 2; ++r) {
    for (int s = 0; s < S; ++s) y[(s0 + s) * y_stride + r0 + r] = HSum256(acc[r][s]) + (bias ? bias[r0 + r] : 0.0f);
  }
}

__attribute__((target("avx2,fma"))) void GemmQ8Avx2(const int8_t* q, const float* scales, const float* bias,
                                                    int64_t rows, int64_t cols, const float* x, int64_t x_stride,
                                                    int64_t batch, float* y, int64_t y_stride) {
  int64_t r0 = 0;
  for (; r0 + 2 <= rows; r0 += 2) {
    int64_t s0 = 0;
    for (; s0 + 2 <= batch; s0 += 2) Q8Tile256<2>(q, scales, bias, r0, cols, x, x_stride, s0, y, y_stride);
    if (s0 < batch) Q8Tile256<1>(q, scales, bias, r0, cols, x, x_stride, s0, y, y_stride);
  }
  if (r0 < rows) {
    TiledGemmQ8<V8, I8x8, 1, 1>(q + r0 * cols, scales + r0 * (cols / kQ8Block), bias ? bias + r0 : nullptr, rows - r0,
                                cols, x, x_stride, batch, y + r0, y_stride);
  }
}
#endif

void GemmQ8Sse(const int8_t* q, const float* scales, const float* bias, int64_t rows, int64_t cols, const float* x,
               int64_t x_stride, int64_t batch, float* y, int64_t y_stride) {
  TiledGemmQ8<V4, I8x4, 1, 2>(q, scales, bias, rows, cols, x, x_stride, batch, y, y_stride);
}

using GemmQ8Fn = void (*)(const int8_t*, const float*, const float*, int64_t, int64_t, const float*, int64_t, int64_t,
                          float*, int64_t);

GemmQ8Fn PickGemmQ8() {
#if !defined(INFERD_NO_IFUNC) && !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return GemmQ8Avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return GemmQ8Avx2;
#endif
  return GemmQ8Sse;
}

// bf16: R rows' L values widened (a 16-bit shift into FP32's upper half) once, then used for S sequences.
template <typename V, typename U16, int R, int S>
__attribute__((always_inline)) inline void TileBf16(const uint16_t* w, int64_t cols, const float* x, int64_t x_stride,
                                                    float (&out)[R][S], const uint16_t* prefetch) {
  constexpr int64_t L = sizeof(V) / sizeof(float);
  typedef uint32_t U32 __attribute__((vector_size(sizeof(V))));
  V acc[R][S];
  for (int r = 0; r < R; ++r)
    for (int s = 0; s < S; ++s) acc[r][s] = V{};
  for (int64_t c = 0; c < cols; c += L) {
    V wf[R];
    for (int r = 0; r < R; ++r) {
      U16 t;
      __builtin_memcpy(&t, w + r * cols + c, sizeof(U16));
      const U32 u = __builtin_convertvector(t, U32) << 16;
      __builtin_memcpy(&wf[r], &u, sizeof(V));
    }
    if (prefetch != nullptr && c % 32 == 0) {
      for (int r = 0; r < R; ++r) __builtin_prefetch(prefetch + r * cols + c + 128);
    }
    for (int s = 0; s < S; ++s) {
      V xv;
      __builtin_memcpy(&xv, x + s * x_stride + c, sizeof(V));
      for (int r = 0; r < R; ++r) acc[r][s] += wf[r] * xv;
    }
  }
  for (int r = 0; r < R; ++r)
    for (int s = 0; s < S; ++s) out[r][s] = HSum(acc[r][s]);
}

template <typename V, typename U16, int R, int S>
__attribute__((always_inline)) inline void TiledGemmBf16(const uint16_t* w, const float* bias, int64_t rows,
                                                         int64_t cols, const float* x, int64_t x_stride, int64_t batch,
                                                         float* y, int64_t y_stride) {
  auto put = [&](int64_t r, int64_t s, float v) { y[s * y_stride + r] = v + (bias ? bias[r] : 0.0f); };
  int64_t r0 = 0;
  for (; r0 + R <= rows; r0 += R) {
    const uint16_t* wr = w + r0 * cols;
    int64_t s0 = 0;
    for (; s0 + S <= batch; s0 += S) {
      float out[R][S];
      TileBf16<V, U16, R, S>(wr, cols, x + s0 * x_stride, x_stride, out,
                             s0 == 0 && r0 + 2 * R <= rows ? wr + R * cols : nullptr);
      for (int r = 0; r < R; ++r)
        for (int s = 0; s < S; ++s) put(r0 + r, s0 + s, out[r][s]);
    }
    for (; s0 < batch; ++s0) {
      float out[R][1];
      TileBf16<V, U16, R, 1>(wr, cols, x + s0 * x_stride, x_stride, out, nullptr);
      for (int r = 0; r < R; ++r) put(r0 + r, s0, out[r][0]);
    }
  }
  for (; r0 < rows; ++r0) {
    for (int64_t s0 = 0; s0 < batch; ++s0) {
      float out[1][1];
      TileBf16<V, U16, 1, 1>(w + r0 * cols, cols, x + s0 * x_stride, x_stride, out, nullptr);
      put(r0, s0, out[0][0]);
    }
  }
}

typedef uint16_t U16x16 __attribute__((vector_size(32)));
typedef uint16_t U16x8 __attribute__((vector_size(16)));
typedef uint16_t U16x4 __attribute__((vector_size(8)));

using GemmBf16Fn = void (*)(const uint16_t*, const float*, int64_t, int64_t, const float*, int64_t, int64_t, float*,
                            int64_t);

__attribute__((target("avx512f"))) void GemmBf16Avx512(const uint16_t* w, const float* bias, int64_t rows, int64_t cols,
                                                       const float* x, int64_t x_stride, int64_t batch, float* y,
                                                       int64_t y_stride) {
  TiledGemmBf16<V16, U16x16, 4, 4>(w, bias, rows, cols, x, x_stride, batch, y, y_stride);
}

__attribute__((target("avx2,fma"))) void GemmBf16Avx2(const uint16_t* w, const float* bias, int64_t rows, int64_t cols,
                                                      const float* x, int64_t x_stride, int64_t batch, float* y,
                                                      int64_t y_stride) {
  TiledGemmBf16<V8, U16x8, 4, 2>(w, bias, rows, cols, x, x_stride, batch, y, y_stride);
}

void GemmBf16Sse(const uint16_t* w, const float* bias, int64_t rows, int64_t cols, const float* x, int64_t x_stride,
                 int64_t batch, float* y, int64_t y_stride) {
  TiledGemmBf16<V4, U16x4, 2, 2>(w, bias, rows, cols, x, x_stride, batch, y, y_stride);
}

GemmBf16Fn PickGemmBf16() {
#if !defined(INFERD_NO_IFUNC) && !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return GemmBf16Avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return GemmBf16Avx2;
#endif
  return GemmBf16Sse;
}

}  // namespace

void QuantizeQ8(const float* w, int64_t rows, int64_t cols, int8_t* q, float* scales) {
  const int64_t blocks = cols / kQ8Block;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < blocks; ++b) {
      const float* src = w + r * cols + b * kQ8Block;
      float amax = 0;
      for (int64_t i = 0; i < kQ8Block; ++i) amax = std::max(amax, std::fabs(src[i]));
      const float s = amax / 127.0f;
      const float inv = s > 0 ? 1.0f / s : 0.0f;
      scales[r * blocks + b] = s;
      for (int64_t i = 0; i < kQ8Block; ++i) {
        const float v = std::nearbyint(src[i] * inv);  // NaN (from a NaN or infinite weight): 0, not undefined
        q[r * cols + b * kQ8Block + i] = static_cast<int8_t>(v == v ? std::clamp(v, -127.0f, 127.0f) : 0.0f);
      }
    }
  }
}

INFERD_KERNEL void DequantizeQ8(const int8_t* q, const float* scales, int64_t rows, int64_t cols, float* w) {
  const int64_t blocks = rows * (cols / kQ8Block);
  for (int64_t b = 0; b < blocks; ++b) {
    const float s = scales[b];
#pragma omp simd
    for (int64_t i = 0; i < kQ8Block; ++i) w[b * kQ8Block + i] = static_cast<float>(q[b * kQ8Block + i]) * s;
  }
}

void GemmSmallQ8(const int8_t* q, const float* scales, const float* bias, int64_t rows, int64_t cols, const float* x,
                 int64_t x_stride, int64_t batch, float* y, int64_t y_stride) {
  static const GemmQ8Fn fn = PickGemmQ8();
  fn(q, scales, bias, rows, cols, x, x_stride, batch, y, y_stride);
}

bool GemmSmallQ8With(std::string_view isa, const int8_t* q, const float* scales, const float* bias, int64_t rows,
                     int64_t cols, const float* x, int64_t x_stride, int64_t batch, float* y, int64_t y_stride) {
  GemmQ8Fn fn = nullptr;
  if (isa == "portable") fn = GemmQ8Sse;
#if !defined(INFERD_NO_IFUNC) && !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
  __builtin_cpu_init();
  if (isa == "avx512" && __builtin_cpu_supports("avx512f")) fn = GemmQ8Avx512;
  if (isa == "avx2" && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) fn = GemmQ8Avx2;
#endif
  if (fn == nullptr) return false;
  fn(q, scales, bias, rows, cols, x, x_stride, batch, y, y_stride);
  return true;
}

void ToBf16(const float* w, int64_t n, uint16_t* out) {
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t u = std::bit_cast<uint32_t>(w[i]);
    if (std::isnan(w[i])) {
      out[i] = static_cast<uint16_t>((u >> 16) | 0x40);  // a quiet NaN, whatever its payload
      continue;
    }
    const uint32_t round = 0x7fff + ((u >> 16) & 1);  // to the nearest, ties to even
    out[i] = static_cast<uint16_t>((u + round) >> 16);
  }
}

INFERD_KERNEL void FromBf16(const uint16_t* w, int64_t n, float* out) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] = std::bit_cast<float>(static_cast<uint32_t>(w[i]) << 16);
}

void GemmSmallBf16(const uint16_t* w, const float* bias, int64_t rows, int64_t cols, const float* x, int64_t x_stride,
                   int64_t batch, float* y, int64_t y_stride) {
  static const GemmBf16Fn fn = PickGemmBf16();
  fn(w, bias, rows, cols, x, x_stride, batch, y, y_stride);
}

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

// e^x for x <= 0 (softmax's shifted scores), vectorizable: x = n ln2 + r with |r| <= ln2 / 2, e^r by its Taylor
// polynomial to r^6 (relative error < 3e-7), 2^n by the exponent bits. std::exp is a call per score, which in
// attention was as much time as the dot products.
inline float ExpNonPositive(float x) {
  x = std::max(x, -87.0f);                          // below this e^x is 0 in floats' normal range
  const float t = x * 1.44269504088896341f;         // x / ln2
  const float n = (t + 12582912.0f) - 12582912.0f;  // round to nearest (1.5 * 2^23)
  const float r = (x - n * 0.693359375f) - n * -2.12194440e-4f;
  float p = 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  return p * std::bit_cast<float>((static_cast<int32_t>(n) + 127) << 23);
}

INFERD_KERNEL void AttendGroup(const float* q, int64_t group, const float* k, const float* v, const int64_t* offsets,
                               int64_t ctx, int64_t d, float scale, float* scores, float* out) {
  // Scores: each key row read once for every query head of the group.
  for (int64_t p = 0; p < ctx; ++p) {
    const float* kp = k + offsets[p];
    for (int64_t g = 0; g < group; ++g) {
      const float* qg = q + g * d;
      float s = 0;
#pragma omp simd reduction(+ : s)
      for (int64_t i = 0; i < d; ++i) s += qg[i] * kp[i];
      scores[g * ctx + p] = s * scale;
    }
  }
  for (int64_t g = 0; g < group; ++g) {
    float* sg = scores + g * ctx;
    float top = -INFINITY;
#pragma omp simd reduction(max : top)
    for (int64_t p = 0; p < ctx; ++p) top = std::max(top, sg[p]);
    float sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t p = 0; p < ctx; ++p) {
      sg[p] = ExpNonPositive(sg[p] - top);
      sum += sg[p];
    }
    const float inv = 1.0f / sum;
#pragma omp simd
    for (int64_t p = 0; p < ctx; ++p) sg[p] *= inv;
  }
  // The weighted sum: each value row read once too.
  std::fill(out, out + group * d, 0.0f);
  for (int64_t p = 0; p < ctx; ++p) {
    const float* vp = v + offsets[p];
    for (int64_t g = 0; g < group; ++g) {
      const float a = scores[g * ctx + p];
      float* og = out + g * d;
#pragma omp simd
      for (int64_t i = 0; i < d; ++i) og[i] += a * vp[i];
    }
  }
}

INFERD_KERNEL void SwiGlu(float* gate, const float* up, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) gate[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

}  // namespace inferd::llm::kernels
