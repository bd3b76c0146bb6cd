// The int8 kernels against the exact integer product of the same quantised values (every kernel this CPU has),
// and the quantised product against FP32's.
#include "quant/int8_gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace inferd::quant {
namespace {

// wq[j][t] back out of the packed layout.
int8_t Unpacked(const PackedInt8Weights& w, int64_t j, int64_t t) {
  const int64_t groups = w.k4 / 4;
  return w.packed[static_cast<size_t>((((j / 16) * groups + t / 4) * 16 + j % 16) * 4 + t % 4)];
}

std::vector<float> Random(size_t n, std::mt19937* g, float scale) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(*g);
  return v;
}

TEST(Int8GemmTest, EveryKernelGivesTheExactIntegerProduct) {
  std::mt19937 g(7);
  int tried = 0;
  for (const char* isa : {"portable", "avx512vnni", "avx2"}) {
    ActivationCode code;
    if (!ActivationCodeOf(isa, &code)) continue;
    ++tried;
    for (auto [n, k] : {std::pair<int64_t, int64_t>{1, 1}, {17, 5}, {64, 64}, {100, 1024}, {33, 257}}) {
      for (int64_t m : {1, 3, 4, 7, 8, 13, 16}) {
        const auto w = Random(static_cast<size_t>(n * k), &g, 0.05f);
        const auto x = Random(static_cast<size_t>(m * k), &g, 1.0f);
        const auto bias = Random(static_cast<size_t>(n), &g, 0.1f);
        const PackedInt8Weights p = PackInt8Weights(w.data(), n, k);
        QuantizedRows q;
        QuantizeRows(x.data(), m, k, k, code, &q);
        std::vector<float> y(static_cast<size_t>(m * (n + 3)), -1.0f);
        ASSERT_TRUE(Int8GemmWith(isa, q, p, bias.data(), y.data(), n + 3));
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < n; ++j) {
            int64_t acc = 0;
            for (int64_t t = 0; t < k; ++t)
              acc +=
                  (static_cast<int64_t>(q.q[static_cast<size_t>(i * q.k4 + t)]) - code.zero_point) * Unpacked(p, j, t);
            const float want =
                static_cast<float>(acc) * (q.scales[static_cast<size_t>(i)] * p.scales[static_cast<size_t>(j)]) +
                bias[static_cast<size_t>(j)];
            EXPECT_NEAR(y[static_cast<size_t>(i * (n + 3) + j)], want, 1e-5f * (1.0f + std::abs(want)))
                << isa << " m " << m << " n " << n << " k " << k;
          }
          EXPECT_EQ(y[static_cast<size_t>(i * (n + 3) + n)], -1.0f) << "wrote past its row";
        }
      }
    }
  }
  EXPECT_GE(tried, 1);
}

// The largest values each code allows, everywhere: a kernel that saturated (AVX2's int16 pairs) would be off.
TEST(Int8GemmTest, ExtremeValuesDoNotSaturate) {
  for (const char* isa : {"portable", "avx512vnni", "avx2"}) {
    ActivationCode code;
    if (!ActivationCodeOf(isa, &code)) continue;
    const int64_t n = 16, k = 512, m = 2;
    std::vector<float> w(static_cast<size_t>(n * k), 1.0f), x(static_cast<size_t>(m * k), 1.0f);
    for (int64_t t = 0; t < k; ++t) x[static_cast<size_t>(k + t)] = -1.0f;  // row 1: the most negative
    const PackedInt8Weights p = PackInt8Weights(w.data(), n, k);
    QuantizedRows q;
    QuantizeRows(x.data(), m, k, k, code, &q);
    std::vector<float> y(static_cast<size_t>(m * n));
    ASSERT_TRUE(Int8GemmWith(isa, q, p, nullptr, y.data(), n));
    for (int64_t j = 0; j < n; ++j) {
      EXPECT_NEAR(y[static_cast<size_t>(j)], 512.0f, 1e-3f) << isa;
      EXPECT_NEAR(y[static_cast<size_t>(n + j)], -512.0f, 1e-3f) << isa;
    }
  }
}

TEST(Int8GemmTest, CloseToTheFp32Product) {
  std::mt19937 g(3);
  const int64_t n = 256, k = 1024, m = 8;
  const auto w = Random(static_cast<size_t>(n * k), &g, 0.03f);
  const auto x = Random(static_cast<size_t>(m * k), &g, 1.0f);
  const PackedInt8Weights p = PackInt8Weights(w.data(), n, k);
  EXPECT_LT(p.bytes(), static_cast<int64_t>(n * k * 4) * 3 / 10);  // <= 0.3x FP32's bytes
  QuantizedRows q;
  QuantizeRows(x.data(), m, k, k, ChosenActivationCode(), &q);
  std::vector<float> y(static_cast<size_t>(m * n));
  Int8Gemm(q, p, nullptr, y.data(), n);
  double err = 0, norm = 0;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double want = 0;
      for (int64_t t = 0; t < k; ++t)
        want += static_cast<double>(x[static_cast<size_t>(i * k + t)]) * w[static_cast<size_t>(j * k + t)];
      err += std::pow(y[static_cast<size_t>(i * n + j)] - want, 2);
      norm += want * want;
    }
  }
  EXPECT_LT(std::sqrt(err / norm), 0.03);  // relative RMS error (7-bit activations on AVX2 included)
}

// A NaN or infinite activation (a request may carry them) has no int8 value: it becomes 0 (no undefined
// conversion), and the other rows, scaled on their own, keep their answers.
TEST(Int8GemmTest, NonFiniteValuesAreDefinedAndStayInTheirRow) {
  EXPECT_EQ(RoundToLevel(NAN, 127), 0);
  EXPECT_EQ(RoundToLevel(INFINITY, 127), 127);
  EXPECT_EQ(RoundToLevel(-INFINITY, 255), -255);
  EXPECT_EQ(RoundToLevel(2.5f, 127), 2);  // ties to even
  std::mt19937 g(5);
  const int64_t n = 32, k = 64, m = 3;
  auto w = Random(static_cast<size_t>(n * k), &g, 0.1f);
  w[7] = NAN;  // a weight too: 0 in its row, the others as they are
  const PackedInt8Weights p = PackInt8Weights(w.data(), n, k);
  auto x = Random(static_cast<size_t>(m * k), &g, 1.0f);
  std::vector<float> clean(static_cast<size_t>(m * n)), dirty(clean.size());
  QuantizedRows q;
  QuantizeRows(x.data(), m, k, k, ChosenActivationCode(), &q);
  Int8Gemm(q, p, nullptr, clean.data(), n);
  x[1] = NAN;
  x[k + 2] = INFINITY;  // rows 0 and 1 poisoned, row 2 not
  QuantizeRows(x.data(), m, k, k, ChosenActivationCode(), &q);
  Int8Gemm(q, p, nullptr, dirty.data(), n);
  for (int64_t j = 0; j < n; ++j)
    EXPECT_EQ(dirty[static_cast<size_t>(2 * n + j)], clean[static_cast<size_t>(2 * n + j)]);
}

// Every quantiser this CPU has gives the portable one's bytes and scales (ties round to even in both; odd k: tails).
TEST(Int8GemmTest, EveryQuantiserMatchesThePortableOne) {
  std::mt19937 g(5);
  for (const ActivationCode code : {ActivationCode{127, 128}, ActivationCode{63, 64}}) {
    for (int64_t k : {1, 7, 16, 33, 100}) {
      auto x = Random(static_cast<size_t>(3 * k), &g, 2.0f);
      x[0] = 0.5f * (x[1] != 0 ? x[1] : 1.0f);  // a value at a rounding tie after scaling is likely somewhere
      for (int64_t t = 0; t < k; ++t) x[static_cast<size_t>(2 * k + t)] = 0.0f;  // an all-zero row
      QuantizedRows want;
      ASSERT_TRUE(QuantizeRowsWith("portable", x.data(), 3, k, k, code, &want));
      for (const char* isa : {"avx512vnni", "avx2"}) {
        QuantizedRows got;
        if (!QuantizeRowsWith(isa, x.data(), 3, k, k, code, &got)) continue;
        EXPECT_EQ(got.q, want.q) << isa << " k " << k << " levels " << code.levels;
        EXPECT_EQ(got.scales, want.scales) << isa << " k " << k;
      }
    }
  }
}

// Threads' shares (rows x output blocks) written separately add up to the whole product, and nothing outside them.
TEST(Int8GemmTest, PartsAddUpToTheWholeProduct) {
  std::mt19937 g(11);
  const int64_t n = 70, k = 37, m = 11;  // 5 blocks, the last partial
  const auto w = Random(static_cast<size_t>(n * k), &g, 0.05f);
  const auto x = Random(static_cast<size_t>(m * k), &g, 1.0f);
  const PackedInt8Weights p = PackInt8Weights(w.data(), n, k);
  QuantizedRows q;
  QuantizeRows(x.data(), m, k, k, ChosenActivationCode(), &q);
  std::vector<float> whole(static_cast<size_t>(m * n)), parts(static_cast<size_t>(m * n), -7.0f);
  Int8Gemm(q, p, nullptr, whole.data(), n);
  Int8GemmPart(q, p, nullptr, parts.data(), n, {0, 4, 0, 2});
  for (size_t j = 2 * kInt8Block; j < static_cast<size_t>(n); ++j) EXPECT_EQ(parts[j], -7.0f) << "outside its share";
  Int8GemmPart(q, p, nullptr, parts.data(), n, {0, 4, 2, 99});  // clamped to the product's blocks
  Int8GemmPart(q, p, nullptr, parts.data(), n, {4, 11, 0, 5});
  Int8GemmPart(q, p, nullptr, parts.data(), n, {11, 20, 0, 5});  // no rows: nothing
  for (size_t i = 0; i < whole.size(); ++i) EXPECT_EQ(parts[i], whole[i]) << i;
  EXPECT_FALSE(Int8KernelName().empty());
}

}  // namespace
}  // namespace inferd::quant
