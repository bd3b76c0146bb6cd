// The decoder over ATen against an independent float64 reference
// (testdata/make_fixtures.py): logits within 1e-4, greedy continuations
// token for token, whatever the chunking, batching and block placement.
#include "backends/llm/aten_decoder.h"

#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <fstream>
#include <numeric>
#include <sstream>

#include "backends/llm/decode_kernels.h"
#include "llm/decoder_config.h"

namespace inferd::llm {
namespace {

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Reference {
  std::vector<int32_t> prompt;
  std::vector<std::vector<double>> logits;  // per prompt position
  std::vector<int32_t> greedy;
};

Reference LoadReference(const std::string& dir) {
  rapidjson::Document d;
  const std::string text = ReadText(dir + "/reference.json");
  d.Parse(text.data(), text.size());
  Reference r;
  for (const auto& v : d["prompt"].GetArray()) r.prompt.push_back(v.GetInt());
  for (const auto& row : d["logits"].GetArray()) {
    r.logits.emplace_back();
    for (const auto& v : row.GetArray()) r.logits.back().push_back(v.GetDouble());
  }
  for (const auto& v : d["greedy"].GetArray()) r.greedy.push_back(v.GetInt());
  return r;
}

constexpr int64_t kBlockSize = 4;
constexpr int64_t kBlocks = 96;

class DecoderTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    dir_ = std::string(INFERD_LLM_FIXTURES) + "/" + GetParam();
    auto config = ParseDecoderConfig(ReadText(dir_ + "/config.json"));
    ASSERT_TRUE(config.ok()) << config.status().ToString();
    auto weights = LoadDecoderWeights(dir_, *config);
    ASSERT_TRUE(weights.ok()) << weights.status().ToString();
    weights_ = *weights;
    decoder_ = MakeAtenDecoder(weights_);
    ASSERT_TRUE(decoder_->AllocateCache(kBlocks, kBlockSize).ok());
    ref_ = LoadReference(dir_);
    vocab_ = decoder_->config().vocab_size;
  }

  void CheckReducedPrecision(const WeightOptions& options, double tolerance);

  void ExpectNear(const float* got, const std::vector<double>& want, const std::string& where) {
    double worst = 0;
    for (int64_t i = 0; i < vocab_; ++i) worst = std::max(worst, std::abs(got[i] - want[static_cast<size_t>(i)]));
    EXPECT_LT(worst, 1e-4) << where;
  }

  // Blocks in a scattered order, so slots are not contiguous.
  static std::vector<int32_t> Table(int first, int n) {
    std::vector<int32_t> t;
    for (int i = 0; i < n; ++i) t.push_back(static_cast<int32_t>((first + 7 * i) % kBlocks));
    return t;
  }

  void ExpectDecodeMatchesAten(size_t n);

  std::string dir_;
  std::shared_ptr<const DecoderWeights> weights_;
  std::unique_ptr<DecoderModel> decoder_;
  Reference ref_;
  int64_t vocab_ = 0;
};

TEST_P(DecoderTest, WholePromptMatchesReference) {
  const auto table = Table(3, 8);
  StepInput in{ref_.prompt, 0, table, true};
  std::vector<float> logits;
  ASSERT_TRUE(decoder_->Forward(std::span(&in, 1), &logits).ok());
  ASSERT_EQ(static_cast<int64_t>(logits.size()), vocab_);
  ExpectNear(logits.data(), ref_.logits.back(), "last position");
}

TEST_P(DecoderTest, TokenByTokenMatchesEveryPosition) {
  const auto table = Table(5, 8);
  std::vector<float> logits;
  for (size_t p = 0; p < ref_.prompt.size(); ++p) {
    StepInput in{std::span(ref_.prompt).subspan(p, 1), static_cast<int64_t>(p), table, true};
    ASSERT_TRUE(decoder_->Forward(std::span(&in, 1), &logits).ok());
    ExpectNear(logits.data(), ref_.logits[p], "position " + std::to_string(p));
  }
}

TEST_P(DecoderTest, ChunkedPrefillAndBatchedSequencesMatch) {
  // Sequence A prefills in chunks of 3 beside sequence B, which runs the
  // whole prompt at once; both must give the reference's last logits.
  const auto ta = Table(0, 4), tb = Table(16, 4);
  const std::span<const int32_t> prompt(ref_.prompt);
  std::vector<float> logits;
  size_t done = 0;
  bool b_done = false;
  while (done < prompt.size()) {
    const size_t n = std::min<size_t>(3, prompt.size() - done);
    std::vector<StepInput> batch;
    batch.push_back({prompt.subspan(done, n), static_cast<int64_t>(done), ta, done + n == prompt.size()});
    if (!b_done) batch.push_back({prompt, 0, tb, true});
    ASSERT_TRUE(decoder_->Forward(batch, &logits).ok());
    size_t row = 0;
    if (done + n == prompt.size())
      ExpectNear(logits.data() + vocab_ * static_cast<int64_t>(row++), ref_.logits.back(), "A");
    if (!b_done) ExpectNear(logits.data() + vocab_ * static_cast<int64_t>(row), ref_.logits.back(), "B");
    b_done = true;
    done += n;
  }
}

// A speculative step's verification: a chunk of several tokens with logits for each of them (num_logits ==
// tokens) gives the reference's logits at every position, on both paths, beside another sequence's decode token;
// positions written by a chunk can be run again (a rejected draft's slots are overwritten).
TEST_P(DecoderTest, ChunkWithEveryPositionsLogitsMatchesReference) {
  const std::span<const int32_t> prompt(ref_.prompt);
  ASSERT_GE(prompt.size(), 8u);
  for (bool fast : {true, false}) {
    SCOPED_TRACE(fast ? "fast path" : "ATen path");
    auto d = MakeAtenDecoder(weights_, fast);
    ASSERT_TRUE(d->AllocateCache(kBlocks, kBlockSize).ok());
    const auto ta = Table(2, 8), tb = Table(40, 8);
    std::vector<float> logits;
    const size_t p = prompt.size() - 5;  // A has p positions cached, then verifies 4 at once
    StepInput head{prompt.subspan(0, p), 0, ta, 0};
    StepInput other{prompt.subspan(0, p), 0, tb, 0};
    std::vector<StepInput> first = {head, other};
    ASSERT_TRUE(d->Forward(first, &logits).ok());
    EXPECT_TRUE(logits.empty());
    // A garbage draft first (then overwritten), as a rejected speculation leaves it.
    std::vector<int32_t> garbage = {1, 2, 3, 4};
    StepInput bad{garbage, static_cast<int64_t>(p), ta, 4};
    ASSERT_TRUE(d->Forward(std::span(&bad, 1), &logits).ok());
    ASSERT_EQ(static_cast<int64_t>(logits.size()), 4 * vocab_);
    std::vector<StepInput> batch = {{prompt.subspan(p, 4), static_cast<int64_t>(p), ta, 4},
                                    {prompt.subspan(p, 1), static_cast<int64_t>(p), tb, 1}};
    ASSERT_TRUE(d->Forward(batch, &logits).ok());
    ASSERT_EQ(static_cast<int64_t>(logits.size()), 5 * vocab_);
    for (int64_t i = 0; i < 4; ++i)
      ExpectNear(logits.data() + i * vocab_, ref_.logits[p + static_cast<size_t>(i)], "A row " + std::to_string(i));
    ExpectNear(logits.data() + 4 * vocab_, ref_.logits[p], "B");
    // The last two of a chunk only.
    StepInput tail{prompt.subspan(p, 4), static_cast<int64_t>(p), ta, 2};
    ASSERT_TRUE(d->Forward(std::span(&tail, 1), &logits).ok());
    ASSERT_EQ(static_cast<int64_t>(logits.size()), 2 * vocab_);
    ExpectNear(logits.data(), ref_.logits[p + 2], "tail row 0");
    ExpectNear(logits.data() + vocab_, ref_.logits[p + 3], "tail row 1");
    StepInput too_many{prompt.subspan(p, 2), static_cast<int64_t>(p), ta, 3};
    EXPECT_EQ(d->Forward(std::span(&too_many, 1), &logits).code(), StatusCode::kInvalidArgument);
  }
}

TEST_P(DecoderTest, GreedyContinuationMatchesReference) {
  const auto table = Table(9, 8);
  std::vector<int32_t> seq = ref_.prompt;
  std::vector<float> logits;
  StepInput in{seq, 0, table, true};
  ASSERT_TRUE(decoder_->Forward(std::span(&in, 1), &logits).ok());
  std::vector<int32_t> out;
  for (size_t i = 0; i < ref_.greedy.size(); ++i) {
    const int32_t next = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    out.push_back(next);
    seq.push_back(next);
    StepInput step{std::span(seq).subspan(seq.size() - 1), static_cast<int64_t>(seq.size() - 1), table, true};
    ASSERT_TRUE(decoder_->Forward(std::span(&step, 1), &logits).ok());
  }
  EXPECT_EQ(out, ref_.greedy);
}

// Decode steps of several sequences at different positions (Llama's: the raw-buffer path of decode_kernels.h)
// give the logits of the ATen path, step after step, and greedy tokens that agree.
// 3 sequences run their products as matrix-vector ones, 6 through ATen's GEMM.
TEST_P(DecoderTest, DecodeStepsOfManySequencesMatchTheAtenPath) {
  for (size_t n : {3, 6, 17}) ExpectDecodeMatchesAten(n);  // register tiles, with remainders of sequences and rows
}

void DecoderTest::ExpectDecodeMatchesAten(size_t n) {
  SCOPED_TRACE(std::to_string(n) + " sequences");
  auto aten = MakeAtenDecoder(weights_, /*fast_decode=*/false);
  ASSERT_TRUE(aten->AllocateCache(kBlocks, kBlockSize).ok());
  ASSERT_TRUE(decoder_->AllocateCache(kBlocks, kBlockSize).ok());
  const std::span<const int32_t> prompt(ref_.prompt);
  std::vector<std::vector<int32_t>> seqs;
  std::vector<std::vector<int32_t>> tables;
  std::vector<float> fast_logits, ref_logits;
  for (size_t i = 0; i < n; ++i) {
    // Disjoint tables of 5 blocks (20 positions), in reverse order.
    std::vector<int32_t> t;
    for (int b = 4; b >= 0; --b) t.push_back(static_cast<int32_t>(5 * i + static_cast<size_t>(b)));
    tables.push_back(t);
  }
  for (size_t i = 0; i < n; ++i) {
    const size_t length = std::max<size_t>(1, prompt.size() * (n - i) / n);
    seqs.emplace_back(prompt.begin(), prompt.begin() + static_cast<std::ptrdiff_t>(length));
    StepInput in{seqs[i], 0, tables[i], true};
    ASSERT_TRUE(decoder_->Forward(std::span(&in, 1), &fast_logits).ok());
    ASSERT_TRUE(aten->Forward(std::span(&in, 1), &ref_logits).ok());
    seqs[i].push_back(
        static_cast<int32_t>(std::max_element(ref_logits.begin(), ref_logits.end()) - ref_logits.begin()));
  }
  for (int step = 0; step < 6; ++step) {
    std::vector<StepInput> batch;
    for (size_t i = 0; i < n; ++i) {
      const auto& sq = seqs[i];
      batch.push_back({std::span(sq).subspan(sq.size() - 1), static_cast<int64_t>(sq.size() - 1), tables[i],
                       i != 1 || step % 2 == 0});  // the middle one sometimes wants no logits
    }
    ASSERT_TRUE(decoder_->Forward(batch, &fast_logits).ok());
    ASSERT_TRUE(aten->Forward(batch, &ref_logits).ok());
    ASSERT_EQ(fast_logits.size(), ref_logits.size());
    double worst = 0;
    for (size_t j = 0; j < ref_logits.size(); ++j)
      worst = std::max(worst, static_cast<double>(std::abs(fast_logits[j] - ref_logits[j])));
    EXPECT_LT(worst, 1e-4) << "step " << step;
    size_t row = 0;
    for (size_t i = 0; i < n; ++i) {
      if (batch[i].num_logits == 0) {
        seqs[i].push_back(seqs[i].back());
        continue;
      }
      const auto begin = ref_logits.begin() + static_cast<std::ptrdiff_t>(row * static_cast<size_t>(vocab_));
      const auto fbegin = fast_logits.begin() + static_cast<std::ptrdiff_t>(row * static_cast<size_t>(vocab_));
      const auto next = std::max_element(begin, begin + vocab_) - begin;
      EXPECT_EQ(std::max_element(fbegin, fbegin + vocab_) - fbegin, next) << "step " << step << " seq " << i;
      seqs[i].push_back(static_cast<int32_t>(next));
      ++row;
    }
  }
}

TEST_P(DecoderTest, RefusesTokensAndTablesOutOfRange) {
  const auto table = Table(0, 2);
  std::vector<int32_t> bad = {static_cast<int32_t>(vocab_)};
  std::vector<float> logits;
  StepInput in{bad, 0, table, true};
  EXPECT_EQ(decoder_->Forward(std::span(&in, 1), &logits).code(), StatusCode::kInvalidArgument);
  std::vector<int32_t> nine(9, 1);
  StepInput uncovered{nine, 0, table, true};  // 2 blocks of 4 cover 8 positions
  EXPECT_EQ(decoder_->Forward(std::span(&uncovered, 1), &logits).code(), StatusCode::kInvalidArgument);
  std::vector<int32_t> outside = {static_cast<int32_t>(kBlocks)};
  std::vector<int32_t> one = {1};
  StepInput far{one, 0, outside, true};
  EXPECT_EQ(decoder_->Forward(std::span(&far, 1), &logits).code(), StatusCode::kInvalidArgument);
}

// Weight-only int8 (the model's quantization: int8) or bf16 storage (bf16): decode steps read the smaller
// copies; their logits stay within `tolerance` of the FP32 ones' range and greedy tokens mostly agree; GPT-2 is
// refused by name.
void DecoderTest::CheckReducedPrecision(const WeightOptions& options, double tolerance) {
  auto config = ParseDecoderConfig(ReadText(dir_ + "/config.json"));
  ASSERT_TRUE(config.ok());
  auto q = LoadDecoderWeights(dir_, *config, options);
  if (config->architecture != Architecture::kLlama) {
    ASSERT_FALSE(q.ok());
    EXPECT_NE(q.status().message().find("Llama-architecture"), std::string::npos) << q.status().message();
    return;
  }
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  auto int8 = MakeAtenDecoder(*q);
  auto fp32 = MakeAtenDecoder(weights_, /*fast_decode=*/false);
  ASSERT_TRUE(int8->AllocateCache(kBlocks, kBlockSize).ok());
  ASSERT_TRUE(fp32->AllocateCache(kBlocks, kBlockSize).ok());
  constexpr size_t n = 5;
  std::vector<std::vector<int32_t>> seqs, tables;
  std::vector<float> a, b;
  for (size_t i = 0; i < n; ++i) {
    tables.emplace_back();
    for (int k = 0; k < 8; ++k) tables.back().push_back(static_cast<int32_t>(8 * i + static_cast<size_t>(k)));
    seqs.emplace_back(ref_.prompt.begin(), ref_.prompt.begin() + static_cast<std::ptrdiff_t>(2 + i));
    StepInput in{seqs[i], 0, tables[i], true};
    ASSERT_TRUE(int8->Forward(std::span(&in, 1), &a).ok());  // prefill: int8 products too
    ASSERT_TRUE(fp32->Forward(std::span(&in, 1), &b).ok());
    seqs[i].push_back(static_cast<int32_t>(std::max_element(b.begin(), b.end()) - b.begin()));
  }
  int agree = 0, rows = 0;
  double worst = 0, scale = 0;
  for (int step = 0; step < 8; ++step) {
    std::vector<StepInput> batch;
    for (size_t i = 0; i < n; ++i) {
      batch.push_back(
          {std::span(seqs[i]).subspan(seqs[i].size() - 1), static_cast<int64_t>(seqs[i].size() - 1), tables[i], true});
    }
    ASSERT_TRUE(int8->Forward(batch, &a).ok());
    ASSERT_TRUE(fp32->Forward(batch, &b).ok());
    for (size_t i = 0; i < n; ++i) {
      const float* x = a.data() + i * static_cast<size_t>(vocab_);
      const float* y = b.data() + i * static_cast<size_t>(vocab_);
      for (int64_t j = 0; j < vocab_; ++j) {
        worst = std::max(worst, static_cast<double>(std::abs(x[j] - y[j])));
        scale = std::max(scale, static_cast<double>(std::abs(y[j])));
      }
      const auto want = std::max_element(y, y + vocab_) - y;
      agree += (std::max_element(x, x + vocab_) - x) == want;
      ++rows;
      seqs[i].push_back(static_cast<int32_t>(want));  // both continue with the FP32 choice
    }
  }
  EXPECT_LT(worst, tolerance * scale) << "worst logit difference " << worst << " of logits up to " << scale;
  EXPECT_GE(agree, rows * 9 / 10) << agree << " of " << rows << " greedy tokens agree";
  // A prompt of more than 64 tokens in one step (the weights widened for ATen's GEMM) against the same prompt
  // in chunks of 10 (the tiles): the same logits.
  std::vector<int32_t> longp;
  while (longp.size() < 70) longp.insert(longp.end(), ref_.prompt.begin(), ref_.prompt.end());
  longp.resize(70);
  std::vector<int32_t> table;
  for (int k = 0; k < 18; ++k) table.push_back(static_cast<int32_t>(50 + k));
  StepInput whole{longp, 0, table, true};
  ASSERT_TRUE(int8->Forward(std::span(&whole, 1), &a).ok());
  auto chunked = MakeAtenDecoder(*q);
  ASSERT_TRUE(chunked->AllocateCache(kBlocks, kBlockSize).ok());
  for (size_t at = 0; at < longp.size(); at += 10) {
    StepInput part{std::span(longp).subspan(at, 10), static_cast<int64_t>(at), table, at + 10 == longp.size()};
    ASSERT_TRUE(chunked->Forward(std::span(&part, 1), &b).ok());
  }
  ASSERT_EQ(a.size(), b.size());
  for (size_t j = 0; j < a.size(); ++j) EXPECT_NEAR(a[j], b[j], 1e-3) << j;
}

// Uniform values in [-0.5, 0.5) from a fixed linear congruential sequence, into each vector in turn.
void FillUniform(uint32_t state, std::initializer_list<std::vector<float>*> vectors) {
  for (std::vector<float>* v : vectors) {
    for (float& f : *v) {
      state = state * 1664525u + 1013904223u;
      f = static_cast<float>(state >> 8) / 16777216.0f - 0.5f;
    }
  }
}

TEST_P(DecoderTest, Int8DecodeStepsStayCloseToFp32) {
  // Q8 rounds each weight by up to half its block's step (0.4% of the block's largest); through two layers of
  // these random fixtures (wide weights, unlike trained ones) the logits move by up to ~5% of their range.
  CheckReducedPrecision(WeightOptions{.int8 = true}, 0.08);
}

TEST_P(DecoderTest, Bf16DecodeStepsStayCloseToFp32) {
  // bf16 rounds each weight by up to 2^-9 of itself: closer than Q8.
  CheckReducedPrecision(WeightOptions{.bf16 = true}, 0.03);
}

// bf16 storage: rounding to the nearest (ties to even), NaN and infinities kept; the bf16 tiles against the same
// products over the widened weights, for tiles and their remainders.
TEST(DecodeKernelsTest, Bf16RoundsToNearestAndItsProductsEqualTheWidenedOnes) {
  const float in[] = {1.0f,
                      std::bit_cast<float>(0x3f808000u),
                      std::bit_cast<float>(0x3f818000u),
                      std::bit_cast<float>(0x3f808001u),
                      -2.5f,
                      INFINITY,
                      NAN};
  uint16_t out[7];
  kernels::ToBf16(in, 7, out);
  EXPECT_EQ(out[0], 0x3f80);  // exact
  EXPECT_EQ(out[1], 0x3f80);  // a tie: to the even one
  EXPECT_EQ(out[2], 0x3f82);  // a tie: to the even one (up)
  EXPECT_EQ(out[3], 0x3f81);  // above the tie: up
  EXPECT_EQ(out[4], 0xc020);
  EXPECT_EQ(out[5], 0x7f80);
  float back[7];
  kernels::FromBf16(out, 7, back);
  EXPECT_TRUE(std::isnan(back[6]));
  EXPECT_EQ(back[4], -2.5f);
  constexpr int64_t rows = 37, cols = 96;
  std::vector<float> w(rows * cols), x(9 * cols), bias(rows);
  FillUniform(777, {&w, &x, &bias});
  std::vector<uint16_t> b(rows * cols);
  kernels::ToBf16(w.data(), rows * cols, b.data());
  std::vector<float> wide(rows * cols);
  kernels::FromBf16(b.data(), rows * cols, wide.data());
  for (int64_t i = 0; i < rows * cols; ++i)
    EXPECT_LE(std::abs(wide[static_cast<size_t>(i)] - w[static_cast<size_t>(i)]),
              std::abs(w[static_cast<size_t>(i)]) / 256);
  for (int64_t batch : {1, 2, 3, 4, 5, 9}) {
    std::vector<float> y(static_cast<size_t>(batch * rows), 0.f);
    kernels::GemmSmallBf16(b.data(), bias.data(), rows, cols, x.data(), cols, batch, y.data(), rows);
    for (int64_t s = 0; s < batch; ++s) {
      for (int64_t r = 0; r < rows; ++r) {
        double want = bias[static_cast<size_t>(r)];
        for (int64_t k = 0; k < cols; ++k)
          want += static_cast<double>(wide[static_cast<size_t>(r * cols + k)]) * x[static_cast<size_t>(s * cols + k)];
        EXPECT_NEAR(y[static_cast<size_t>(s * rows + r)], want, 1e-4) << "batch " << batch << " s " << s << " r " << r;
      }
    }
  }
}

// The int8 kernel against the same products over its dequantized weights, for tiles and their remainders.
TEST(DecodeKernelsTest, Q8ProductsEqualTheDequantizedOnes) {
  constexpr int64_t rows = 37, cols = 96;
  std::vector<float> w(rows * cols), x(9 * cols), bias(rows);
  FillUniform(12345, {&w, &x, &bias});
  w[5] = 3.0f;  // one block with a large value: its scale grows, the others keep theirs
  std::vector<int8_t> q(rows * cols);
  std::vector<float> scales(rows * cols / kernels::kQ8Block);
  kernels::QuantizeQ8(w.data(), rows, cols, q.data(), scales.data());
  for (int64_t i = 0; i < rows * cols; ++i) {
    const float back = q[static_cast<size_t>(i)] * scales[static_cast<size_t>(i / kernels::kQ8Block)];
    EXPECT_LE(std::abs(back - w[static_cast<size_t>(i)]), scales[static_cast<size_t>(i / kernels::kQ8Block)] / 2 + 1e-6)
        << i;
  }
  int isas = 0;
  for (const char* isa : {"avx512", "avx2", "portable"}) {
    for (int64_t batch : {1, 2, 3, 4, 5, 9}) {
      SCOPED_TRACE(isa);
      std::vector<float> y(static_cast<size_t>(batch * rows), 0.f);
      if (!kernels::GemmSmallQ8With(isa, q.data(), scales.data(), bias.data(), rows, cols, x.data(), cols, batch,
                                    y.data(), rows)) {
        break;  // not on this CPU
      }
      isas += batch == 1;
      for (int64_t s = 0; s < batch; ++s) {
        for (int64_t r = 0; r < rows; ++r) {
          double want = bias[static_cast<size_t>(r)];
          for (int64_t k = 0; k < cols; ++k) {
            want += static_cast<double>(q[static_cast<size_t>(r * cols + k)]) *
                    scales[static_cast<size_t>((r * cols + k) / kernels::kQ8Block)] *
                    x[static_cast<size_t>(s * cols + k)];
          }
          EXPECT_NEAR(y[static_cast<size_t>(s * rows + r)], want, 1e-4)
              << "batch " << batch << " s " << s << " r " << r;
        }
      }
    }
  }
  EXPECT_GE(isas, 1);  // the portable one at least
}

INSTANTIATE_TEST_SUITE_P(Models, DecoderTest, ::testing::Values("llama", "llama_bf16", "qwen2", "gpt2"));

TEST(DecoderWeights, ShapeMismatchNamesTheTensor) {
  const std::string dir = std::string(INFERD_LLM_FIXTURES) + "/llama";
  auto config = ParseDecoderConfig(ReadText(dir + "/config.json"));
  ASSERT_TRUE(config.ok());
  config->intermediate_size += 1;
  auto weights = LoadDecoderWeights(dir, *config);
  ASSERT_FALSE(weights.ok());
  EXPECT_NE(weights.status().message().find("mlp.gate_proj.weight"), std::string::npos) << weights.status().message();
}

}  // namespace
}  // namespace inferd::llm
