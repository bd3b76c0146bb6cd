#include "quant/int8_gemm.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
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

void GemmPortable(const QuantizedRows& x, const PackedInt8Weights& w, const float* bias, float* y, int64_t ys) {
  const int64_t groups = w.k4 / kGroup;
  for (int64_t i = 0; i < x.m; ++i) {
    const uint8_t* xr = x.q.data() + i * x.k4;
    for (int64_t nb = 0; nb < w.n16 / kBlock; ++nb) {
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
  for (int r = 0; r < R; ++r) {
    for (int b = 0; b < B; ++b) {
      alignas(64) int32_t out[kBlock];
      _mm512_store_si512(out, acc[r][b]);
      Finish(out, x, i0 + r, w, nb0 + b, bias, y + (i0 + r) * ys);
    }
  }
}

template <int R>
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void Vnni512Rows(const QuantizedRows& x, int64_t i0,
                                                                        const PackedInt8Weights& w, const float* bias,
                                                                        float* y, int64_t ys) {
  const int64_t blocks = w.n16 / kBlock;
  int64_t nb = 0;
  for (; nb + 2 <= blocks; nb += 2) Vnni512Tile<R, 2>(x, i0, nb, w, bias, y, ys);
  if (nb < blocks) Vnni512Tile<R, 1>(x, i0, nb, w, bias, y, ys);
}

__attribute__((target("avx512f,avx512bw,avx512vnni"))) void GemmVnni512(const QuantizedRows& x,
                                                                        const PackedInt8Weights& w, const float* bias,
                                                                        float* y, int64_t ys) {
  int64_t i = 0;
  for (; i + 8 <= x.m; i += 8) Vnni512Rows<8>(x, i, w, bias, y, ys);
  switch (x.m - i) {
    case 7:
      return Vnni512Rows<7>(x, i, w, bias, y, ys);
    case 6:
      return Vnni512Rows<6>(x, i, w, bias, y, ys);
    case 5:
      return Vnni512Rows<5>(x, i, w, bias, y, ys);
    case 4:
      return Vnni512Rows<4>(x, i, w, bias, y, ys);
    case 3:
      return Vnni512Rows<3>(x, i, w, bias, y, ys);
    case 2:
      return Vnni512Rows<2>(x, i, w, bias, y, ys);
    case 1:
      return Vnni512Rows<1>(x, i, w, bias, y, ys);
    default:
      return;
  }
}

// AVX2 without VNNI: vpmaddubsw (two u8 x s8 products into int16; activations <= 127 so it never saturates), then
// vpmaddwd by ones into int32. A block's 16 outputs are two registers of 8.
template <int R>
__attribute__((target("avx2,fma"))) void Avx2Rows(const QuantizedRows& x, int64_t i0, const PackedInt8Weights& w,
                                                  const float* bias, float* y, int64_t ys) {
  const int64_t groups = w.k4 / kGroup;
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t nb = 0; nb < w.n16 / kBlock; ++nb) {
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
    for (int r = 0; r < R; ++r) {
      alignas(32) int32_t out[kBlock];
      _mm256_store_si256(reinterpret_cast<__m256i*>(out), lo[r]);
      _mm256_store_si256(reinterpret_cast<__m256i*>(out + 8), hi[r]);
      Finish(out, x, i0 + r, w, nb, bias, y + (i0 + r) * ys);
    }
  }
}

__attribute__((target("avx2,fma"))) void GemmAvx2(const QuantizedRows& x, const PackedInt8Weights& w, const float* bias,
                                                  float* y, int64_t ys) {
  int64_t i = 0;
  for (; i + 4 <= x.m; i += 4) Avx2Rows<4>(x, i, w, bias, y, ys);
  switch (x.m - i) {
    case 3:
      return Avx2Rows<3>(x, i, w, bias, y, ys);
    case 2:
      return Avx2Rows<2>(x, i, w, bias, y, ys);
    case 1:
      return Avx2Rows<1>(x, i, w, bias, y, ys);
    default:
      return;
  }
}
#endif

using GemmFn = void (*)(const QuantizedRows&, const PackedInt8Weights&, const float*, float*, int64_t);

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

const Kernel& Chosen() {
  static const Kernel k = [] {
    Kernel out;
    for (std::string_view isa : {"avx512vnni", "avx2", "portable"})
      if (Find(isa, &out)) return out;
    return out;
  }();
  return k;
}

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
      const auto q = static_cast<int8_t>(std::clamp(std::nearbyint(row[t] * inv), -127.0f, 127.0f));
      p.packed[static_cast<size_t>(((nb * groups + t / kGroup) * kBlock + o) * kGroup + t % kGroup)] = q;
      sum += q;
    }
    p.row_sums[static_cast<size_t>(j)] = sum;
  }
  return p;
}

ActivationCode ChosenActivationCode() { return Chosen().code; }

void QuantizeRows(const float* x, int64_t m, int64_t k, int64_t x_stride, ActivationCode code, QuantizedRows* out) {
  out->m = m;
  out->k4 = (k + kGroup - 1) / kGroup * kGroup;
  out->code = code;
  out->q.assign(static_cast<size_t>(m * out->k4), static_cast<uint8_t>(code.zero_point));
  out->scales.assign(static_cast<size_t>(m), 0.0f);
  const float levels = static_cast<float>(code.levels);
  for (int64_t i = 0; i < m; ++i) {
    const float* row = x + i * x_stride;
    float amax = 0.0f;
    for (int64_t t = 0; t < k; ++t) amax = std::max(amax, std::abs(row[t]));
    const float s = amax / levels;
    out->scales[static_cast<size_t>(i)] = s;
    const float inv = s > 0.0f ? 1.0f / s : 0.0f;
    uint8_t* q = out->q.data() + i * out->k4;
    for (int64_t t = 0; t < k; ++t) {
      const float v = std::clamp(std::nearbyint(row[t] * inv), -levels, levels);
      q[t] = static_cast<uint8_t>(static_cast<int32_t>(v) + code.zero_point);
    }
  }
}

void Int8Gemm(const QuantizedRows& x, const PackedInt8Weights& w, const float* bias, float* y, int64_t y_stride) {
  Chosen().fn(x, w, bias, y, y_stride);
}

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
  k.fn(x, w, bias, y, y_stride);
  return true;
}

}  // namespace inferd::quant
