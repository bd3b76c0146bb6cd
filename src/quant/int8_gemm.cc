#include "quant/int8_gemm.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

// Hand-picked by the CPU at run time (not target_clones: the kernels differ). The sanitizer builds use the
// portable one (as decode_kernels.cc: no ifunc-style dispatch before their runtimes are up).
#if !defined(INFERD_NO_IFUNC) && !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
#define INFERD_INT8_SIMD 1
#endif

namespace inferd::quant {
namespace {

constexpr int64_t kBlock = 16;  // outputs per packed block
constexpr int64_t kGroup = 4;   // k values per packed group (one int32 of activations)

// One block's 16 accumulators of one row -> y (the zero point's term removed, scaled, biased).
inline void Finish(const int32_t (&acc)[kBlock], const QuantizedRows& x, int64_t i, const PackedInt8Weights& w,
                   int64_t nb, const float* bias, float* y_row) {
  const float xs = x.scales[static_cast<size_t>(i)];
  const int64_t j0 = nb * kBlock, end = std::min(kBlock, w.n - j0);
  for (int64_t o = 0; o < end; ++o) {
    const int64_t j = j0 + o;
    const int32_t v = acc[o] - x.code.zero_point * w.row_sums[static_cast<size_t>(j)];
    y_row[j] = static_cast<float>(v) * (xs * w.scales[static_cast<size_t>(j)]) + (bias ? bias[j] : 0.0f);
  }
}

int32_t Load32(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

void GemmPortable(const QuantizedRows& x, const PackedInt8Weights& w, const float* bias, float* y, int64_t ys,
                  const GemmPart& part) {
  const int64_t groups = w.k4 / kGroup;
  for (int64_t i = part.row_begin; i < part.row_end; ++i) {
    const uint8_t* xr = x.q.data() + i * x.k4;
    for (int64_t nb = part.block_begin; nb < part.block_end; ++nb) {
      int32_t acc[kBlock] = {};
      const int8_t* wb = w.packed.data() + nb * groups * kBlock * kGroup;
      for (int64_t g = 0; g < groups; ++g) {
        const uint8_t* xg = xr + g * kGroup;
        const int8_t* wg = wb + g * kBlock * kGroup;
        for (int64_t o = 0; o < kBlock; ++o)
          for (int64_t t = 0; t < kGroup; ++t) acc[o] += static_cast<int32_t>(xg[t]) * wg[o * kGroup + t];
      }
      Finish(acc, x, i, w, nb, bias, y + i * ys);
    }
  }
}

// tile.operator()<R>(i) over rows [r0, r1): tiles of Max rows, then one of the remainder's height.
template <int R, class Tile>
void RemainderTile(int64_t i, int64_t left, Tile& tile) {
  if constexpr (R > 0) {
    if (left == R) return tile.template operator()<R>(i);
    RemainderTile<R - 1>(i, left, tile);
  }
}

template <int Max, class Tile>
void ForRowTiles(int64_t r0, int64_t r1, Tile&& tile) {
  int64_t i = r0;
  for (; i + Max <= r1; i += Max) tile.template operator()<Max>(i);
  RemainderTile<Max - 1>(i, r1 - i, tile);
}

#ifdef INFERD_INT8_SIMD
// R rows x B blocks of 16 outputs at once: R * B accumulators; per group of 4 k-values, B weight loads and R
// broadcasts feed R * B vpdpbusd (8 x 2: 16 of them per 10 loads).
template <int R, int B>
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void Vnni512Tile(const QuantizedRows& x, int64_t i0, int64_t nb0,
                                                                        const PackedInt8Weights& w, const float* bias,
                                                                        float* y, int64_t ys) {
  const int64_t groups = w.k4 / kGroup;
  __m512i acc[R][B];
  for (int r = 0; r < R; ++r)
    for (int b = 0; b < B; ++b) acc[r][b] = _mm512_setzero_si512();
  const int8_t* wb = w.packed.data() + nb0 * groups * kBlock * kGroup;
  const int64_t block_stride = groups * kBlock * kGroup;
  const uint8_t* xr = x.q.data() + i0 * x.k4;
  for (int64_t g = 0; g < groups; ++g) {
    __m512i wv[B];
    for (int b = 0; b < B; ++b) wv[b] = _mm512_loadu_si512(wb + b * block_stride + g * kBlock * kGroup);
    for (int r = 0; r < R; ++r) {
      const __m512i xv = _mm512_set1_epi32(Load32(xr + r * x.k4 + g * kGroup));
      for (int b = 0; b < B; ++b) acc[r][b] = _mm512_dpbusd_epi32(acc[r][b], xv, wv[b]);
    }
  }
  // y = (acc - zp * row_sums) * (xs * ws) + bias, 16 outputs at a time (the last block masked to n).
  const __m512i zp = _mm512_set1_epi32(x.code.zero_point);
  for (int b = 0; b < B; ++b) {
    const int64_t j0 = (nb0 + b) * kBlock;
    const __mmask16 mask = static_cast<__mmask16>(w.n - j0 >= kBlock ? 0xffff : (1u << (w.n - j0)) - 1);
    const __m512i sums = _mm512_mullo_epi32(zp, _mm512_loadu_si512(w.row_sums.data() + j0));
    const __m512 ws = _mm512_maskz_loadu_ps(mask, w.scales.data() + j0);
    const __m512 bv = bias ? _mm512_maskz_loadu_ps(mask, bias + j0) : _mm512_setzero_ps();
    for (int r = 0; r < R; ++r) {
      const __m512 scale = _mm512_mul_ps(ws, _mm512_set1_ps(x.scales[static_cast<size_t>(i0 + r)]));
      // (maskz: GCC 12 warns of the unmasked form's undefined pass-through)
      const __m512 v = _mm512_maskz_cvtepi32_ps(0xffff, _mm512_sub_epi32(acc[r][b], sums));
      _mm512_mask_storeu_ps(y + (i0 + r) * ys + j0, mask, _mm512_fmadd_ps(v, scale, bv));
    }
  }
}

// R rows over blocks [b0, b1), two blocks at a time. Rows outside, blocks inside: measured (1024 x 1024 weights,
// 64 and 256 rows, one thread) a little faster than blocks outside (the weights re-read from L2 for every 8 rows
// rather than the rows for every 2 blocks).
template <int R>
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void Vnni512Rows(const QuantizedRows& x, int64_t i0,
                                                                        const PackedInt8Weights& w, const float* bias,
                                                                        float* y, int64_t ys, int64_t b0, int64_t b1) {
  int64_t nb = b0;
  for (; nb + 2 <= b1; nb += 2) Vnni512Tile<R, 2>(x, i0, nb, w, bias, y, ys);
  if (nb < b1) Vnni512Tile<R, 1>(x, i0, nb, w, bias, y, ys);
}

// The arguments of one product, handed to a tile of R rows (a functor rather than a template lambda: the ONNX fuzz
// target compiles this file as C++17).
struct TileArgs {
  const QuantizedRows& x;
  const PackedInt8Weights& w;
  const float* bias;
  float* y;
  int64_t ys, b0, b1;
};

struct Vnni512RowTile {
  const TileArgs& a;
  template <int R>
  void operator()(int64_t i) const {
    Vnni512Rows<R>(a.x, i, a.w, a.bias, a.y, a.ys, a.b0, a.b1);
  }
};

void GemmVnni512(const QuantizedRows& x, const PackedInt8Weights& w, const float* bias, float* y, int64_t ys,
                 const GemmPart& part) {
  const TileArgs args{x, w, bias, y, ys, part.block_begin, part.block_end};
  ForRowTiles<8>(part.row_begin, part.row_end, Vnni512RowTile{args});
}

// AVX2 without VNNI: vpmaddubsw (two u8 x s8 products into int16; activations <= 127 so it never saturates), then
// vpmaddwd by ones into int32. A block's 16 outputs are two registers of 8.
template <int R>
__attribute__((target("avx2,fma"))) void Avx2Tile(const QuantizedRows& x, int64_t i0, int64_t nb,
                                                  const PackedInt8Weights& w, const float* bias, float* y, int64_t ys) {
  const int64_t groups = w.k4 / kGroup;
  const __m256i ones = _mm256_set1_epi16(1);
  {
    __m256i lo[R], hi[R];
    for (int r = 0; r < R; ++r) lo[r] = hi[r] = _mm256_setzero_si256();
    const int8_t* wb = w.packed.data() + nb * groups * kBlock * kGroup;
    for (int64_t g = 0; g < groups; ++g) {
      const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb + g * kBlock * kGroup));
      const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb + g * kBlock * kGroup + 32));
      for (int r = 0; r < R; ++r) {
        const __m256i xv = _mm256_set1_epi32(Load32(x.q.data() + (i0 + r) * x.k4 + g * kGroup));
        lo[r] = _mm256_add_epi32(lo[r], _mm256_madd_epi16(_mm256_maddubs_epi16(xv, w0), ones));
        hi[r] = _mm256_add_epi32(hi[r], _mm256_madd_epi16(_mm256_maddubs_epi16(xv, w1), ones));
      }
    }
    const int64_t j0 = nb * kBlock;
    if (w.n - j0 < kBlock) {  // the last, partial block
      for (int r = 0; r < R; ++r) {
        alignas(32) int32_t out[kBlock];
        _mm256_store_si256(reinterpret_cast<__m256i*>(out), lo[r]);
        _mm256_store_si256(reinterpret_cast<__m256i*>(out + 8), hi[r]);
        Finish(out, x, i0 + r, w, nb, bias, y + (i0 + r) * ys);
      }
      return;
    }
    // y = (acc - zp * row_sums) * (xs * ws) + bias, 8 outputs at a time.
    const __m256i zp = _mm256_set1_epi32(x.code.zero_point);
    const __m256i s0 = _mm256_mullo_epi32(zp, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(&w.row_sums[j0]))),
                  s1 =
                      _mm256_mullo_epi32(zp, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(&w.row_sums[j0 + 8])));
    const __m256 w0s = _mm256_loadu_ps(&w.scales[j0]), w1s = _mm256_loadu_ps(&w.scales[j0 + 8]);
    const __m256 b0 = bias ? _mm256_loadu_ps(bias + j0) : _mm256_setzero_ps(),
                 b1 = bias ? _mm256_loadu_ps(bias + j0 + 8) : _mm256_setzero_ps();
    for (int r = 0; r < R; ++r) {
      const __m256 xs = _mm256_set1_ps(x.scales[static_cast<size_t>(i0 + r)]);
      float* yr = y + (i0 + r) * ys + j0;
      _mm256_storeu_ps(yr,
                       _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(lo[r], s0)), _mm256_mul_ps(w0s, xs), b0));
      _mm256_storeu_ps(yr + 8,
                       _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(hi[r], s1)), _mm256_mul_ps(w1s, xs), b1));
    }
  }
}

struct Avx2RowTile {
  const TileArgs& a;
  template <int R>
  void operator()(int64_t i) const {
    Avx2Tile<R>(a.x, i, a.b0, a.w, a.bias, a.y, a.ys);  // b0: the block
  }
};

void GemmAvx2(const QuantizedRows& x, const PackedInt8Weights& w, const float* bias, float* y, int64_t ys,
              const GemmPart& part) {
  for (int64_t nb = part.block_begin; nb < part.block_end; ++nb) {
    const TileArgs args{x, w, bias, y, ys, nb, nb + 1};
    ForRowTiles<4>(part.row_begin, part.row_end, Avx2RowTile{args});
  }
}
#endif

using GemmFn = void (*)(const QuantizedRows&, const PackedInt8Weights&, const float*, float*, int64_t, const GemmPart&);

struct Kernel {
  GemmFn fn;
  ActivationCode code;
};

constexpr ActivationCode kFull{127, 128};
constexpr ActivationCode kSevenBits{63, 64};

bool Find(std::string_view isa, Kernel* k) {
  if (isa == "portable") {
    *k = {GemmPortable, kFull};
    return true;
  }
#ifdef INFERD_INT8_SIMD
  __builtin_cpu_init();
  if (isa == "avx512vnni" && __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw")) {
    *k = {GemmVnni512, kFull};
    return true;
  }
  if (isa == "avx2" && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    *k = {GemmAvx2, kSevenBits};
    return true;
  }
#endif
  return false;
}

// The best kernel this CPU has, or the one INFERD_INT8_ISA names when the CPU
// has it (benchmarks measure the AVX2 kernel on a VNNI machine with it).
const Kernel& Chosen() {
  static const Kernel k = [] {
    Kernel out;
    if (const char* isa = std::getenv("INFERD_INT8_ISA"); isa && Find(isa, &out)) return out;
    for (std::string_view isa : {"avx512vnni", "avx2", "portable"})
      if (Find(isa, &out)) return out;
    return out;
  }();
  return k;
}

const char* ChosenName() {
  static const char* name = [] {
    Kernel k;
    for (const char* isa : {"avx512vnni", "avx2", "portable"})
      if (Find(isa, &k) && k.fn == Chosen().fn) return isa;
    return "portable";
  }();
  return name;
}

GemmPart Whole(const QuantizedRows& x, const PackedInt8Weights& w) { return {0, x.m, 0, w.n16 / kBlock}; }

}  // namespace

PackedInt8Weights PackInt8Weights(const float* w, int64_t n, int64_t k) {
  PackedInt8Weights p;
  p.n = n;
  p.k = k;
  p.k4 = (k + kGroup - 1) / kGroup * kGroup;
  p.n16 = (n + kBlock - 1) / kBlock * kBlock;
  p.packed.assign(static_cast<size_t>(p.n16 * p.k4), 0);
  p.scales.assign(static_cast<size_t>(n), 0.0f);
  p.row_sums.assign(static_cast<size_t>(p.n16), 0);
  const int64_t groups = p.k4 / kGroup;
  for (int64_t j = 0; j < n; ++j) {
    const float* row = w + j * k;
    float amax = 0.0f;
    for (int64_t t = 0; t < k; ++t) amax = std::max(amax, std::abs(row[t]));
    const float s = amax / 127.0f;
    p.scales[static_cast<size_t>(j)] = s;
    const float inv = s > 0.0f ? 1.0f / s : 0.0f;
    const int64_t nb = j / kBlock, o = j % kBlock;
    int32_t sum = 0;
    for (int64_t t = 0; t < k; ++t) {
      const auto q = static_cast<int8_t>(RoundToLevel(row[t] * inv, 127.0f));
      p.packed[static_cast<size_t>(((nb * groups + t / kGroup) * kBlock + o) * kGroup + t % kGroup)] = q;
      sum += q;
    }
    p.row_sums[static_cast<size_t>(j)] = sum;
  }
  return p;
}

ActivationCode ChosenActivationCode() { return Chosen().code; }

namespace {

// One row's max |x| and its quantised values q[0..k) (the padding is the caller's).
void QuantizeRowPortable(const float* row, int64_t k, ActivationCode code, float* scale, uint8_t* q) {
  const float levels = static_cast<float>(code.levels);
  float amax = 0.0f;
  for (int64_t t = 0; t < k; ++t) amax = std::max(amax, std::abs(row[t]));
  const float s = amax / levels;
  *scale = s;
  const float inv = s > 0.0f ? 1.0f / s : 0.0f;
  for (int64_t t = 0; t < k; ++t) {
    q[t] = static_cast<uint8_t>(RoundToLevel(row[t] * inv, levels) + code.zero_point);
  }
}

#ifdef INFERD_INT8_SIMD
// The same, 16 values at a time: vcvtps2dq rounds to nearest even as nearbyint does (the default MXCSR mode).
__attribute__((target("avx512f,avx512bw,avx512vl"))) void QuantizeRowAvx512(const float* row, int64_t k,
                                                                            ActivationCode code, float* scale,
                                                                            uint8_t* q) {
  __m512 m = _mm512_setzero_ps();
  int64_t t = 0;
  for (; t + 16 <= k; t += 16) m = _mm512_max_ps(m, _mm512_abs_ps(_mm512_loadu_ps(row + t)));
  if (t < k) {
    const __mmask16 tail = static_cast<__mmask16>((1u << (k - t)) - 1);
    m = _mm512_max_ps(m, _mm512_abs_ps(_mm512_maskz_loadu_ps(tail, row + t)));
  }
  const float levels = static_cast<float>(code.levels);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, m);
  float amax = 0.0f;
  for (float v : lanes) amax = std::max(amax, v);
  const float s = amax / levels;
  *scale = s;
  const __m512 inv = _mm512_set1_ps(s > 0.0f ? 1.0f / s : 0.0f), hi = _mm512_set1_ps(levels),
               lo = _mm512_set1_ps(-levels);
  const __m512i zp = _mm512_set1_epi32(code.zero_point);
  for (t = 0; t < k; t += 16) {
    const __mmask16 mask = static_cast<__mmask16>(k - t >= 16 ? 0xffff : (1u << (k - t)) - 1);
    __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(mask, row + t), inv);
    v = _mm512_min_ps(_mm512_max_ps(v, lo), hi);
    const __m512i i = _mm512_add_epi32(_mm512_cvtps_epi32(v), zp);
    _mm_mask_storeu_epi8(q + t, mask, _mm512_cvtusepi32_epi8(i));
  }
}

// AVX2: 8 values at a time (vcvtps2dq, then packed down to bytes).
__attribute__((target("avx2,fma"))) void QuantizeRowAvx2(const float* row, int64_t k, ActivationCode code, float* scale,
                                                         uint8_t* q) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 m = _mm256_setzero_ps();
  int64_t t = 0;
  for (; t + 8 <= k; t += 8) m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(row + t)));
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, m);
  float amax = 0.0f;
  for (float v : lanes) amax = std::max(amax, v);
  for (int64_t u = t; u < k; ++u) amax = std::max(amax, std::abs(row[u]));
  const float levels = static_cast<float>(code.levels);
  const float s = amax / levels;
  *scale = s;
  const float inv_s = s > 0.0f ? 1.0f / s : 0.0f;
  const __m256 inv = _mm256_set1_ps(inv_s), hi = _mm256_set1_ps(levels), lo = _mm256_set1_ps(-levels);
  const __m256i zp = _mm256_set1_epi32(code.zero_point);
  for (t = 0; t + 8 <= k; t += 8) {
    __m256 v = _mm256_mul_ps(_mm256_loadu_ps(row + t), inv);
    v = _mm256_min_ps(_mm256_max_ps(v, lo), hi);
    const __m256i i = _mm256_add_epi32(_mm256_cvtps_epi32(v), zp);  // 0..255
    const __m128i w16 = _mm_packus_epi32(_mm256_castsi256_si128(i), _mm256_extracti128_si256(i, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(q + t), _mm_packus_epi16(w16, w16));
  }
  for (; t < k; ++t) {
    q[t] = static_cast<uint8_t>(RoundToLevel(row[t] * inv_s, levels) + code.zero_point);
  }
}
#endif

}  // namespace

namespace {

using QuantizeRowFn = void (*)(const float*, int64_t, ActivationCode, float*, uint8_t*);

bool FindQuantizer(std::string_view isa, QuantizeRowFn* fn) {
  if (isa == "portable") {
    *fn = QuantizeRowPortable;
    return true;
  }
#ifdef INFERD_INT8_SIMD
  __builtin_cpu_init();
  if (isa == "avx512vnni" && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl")) {
    *fn = QuantizeRowAvx512;
    return true;
  }
  if (isa == "avx2" && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    *fn = QuantizeRowAvx2;
    return true;
  }
#endif
  return false;
}

void QuantizeRowsBy(QuantizeRowFn fn, const float* x, int64_t m, int64_t k, int64_t x_stride, ActivationCode code,
                    QuantizedRows* out) {
  out->m = m;
  out->k4 = (k + kGroup - 1) / kGroup * kGroup;
  out->code = code;
  out->q.resize(static_cast<size_t>(m * out->k4));
  out->scales.resize(static_cast<size_t>(m));
  for (int64_t i = 0; i < m; ++i) {
    uint8_t* q = out->q.data() + i * out->k4;
    fn(x + i * x_stride, k, code, &out->scales[static_cast<size_t>(i)], q);
    for (int64_t t = k; t < out->k4; ++t) q[t] = static_cast<uint8_t>(code.zero_point);
  }
}

}  // namespace

void QuantizeRows(const float* x, int64_t m, int64_t k, int64_t x_stride, ActivationCode code, QuantizedRows* out) {
  // The quantiser of the chosen kernel's instruction set (the AVX-512 one serves VNNI).
  static const QuantizeRowFn fn = [] {
    QuantizeRowFn f = QuantizeRowPortable;
    if (!FindQuantizer(Int8KernelName(), &f)) FindQuantizer("portable", &f);
    return f;
  }();
  QuantizeRowsBy(fn, x, m, k, x_stride, code, out);
}

bool QuantizeRowsWith(std::string_view isa, const float* x, int64_t m, int64_t k, int64_t x_stride, ActivationCode code,
                      QuantizedRows* out) {
  QuantizeRowFn fn;
  if (!FindQuantizer(isa, &fn)) return false;
  QuantizeRowsBy(fn, x, m, k, x_stride, code, out);
  return true;
}

void Int8Gemm(const QuantizedRows& x, const PackedInt8Weights& w, const float* bias, float* y, int64_t y_stride) {
  Chosen().fn(x, w, bias, y, y_stride, Whole(x, w));
}

void Int8GemmPart(const QuantizedRows& x, const PackedInt8Weights& w, const float* bias, float* y, int64_t y_stride,
                  const GemmPart& part) {
  GemmPart p = part;
  p.row_begin = std::max<int64_t>(p.row_begin, 0);
  p.row_end = std::min(p.row_end, x.m);
  p.block_begin = std::max<int64_t>(p.block_begin, 0);
  p.block_end = std::min(p.block_end, w.n16 / kBlock);
  if (p.row_begin >= p.row_end || p.block_begin >= p.block_end) return;
  Chosen().fn(x, w, bias, y, y_stride, p);
}

std::string_view Int8KernelName() { return ChosenName(); }

bool ActivationCodeOf(std::string_view isa, ActivationCode* code) {
  Kernel k;
  if (!Find(isa, &k)) return false;
  *code = k.code;
  return true;
}

bool Int8GemmWith(std::string_view isa, const QuantizedRows& x, const PackedInt8Weights& w, const float* bias, float* y,
                  int64_t y_stride) {
  Kernel k;
  if (!Find(isa, &k)) return false;
  k.fn(x, w, bias, y, y_stride, Whole(x, w));
  return true;
}

}  // namespace inferd::quant
