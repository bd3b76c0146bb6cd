// LoRA adapters in the decoder's steps against the same base model with each
// adapter merged into its weights (W + scale * B A, merged in python3-torch by
// testdata/make_fixtures.py): sequences of different adapters and of the base
// model batched together give each its merged model's logits within 1e-4 and
// the same greedy tokens, on the raw-buffer path and on ATen's.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "backends/llm/aten_decoder.h"
#include "backends/llm/decode_kernels.h"
#include "llm/decoder_config.h"
#include "llm/lora_adapter.h"

namespace inferd::llm {
namespace {

std::string FileText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

constexpr int64_t kLoraBlockSize = 4;
constexpr int64_t kLoraBlocks = 64;
const std::string kLoraFixtures = std::string(INFERD_LLM_FIXTURES);

class LoraDecoderTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    auto config = ParseDecoderConfig(FileText(kLoraFixtures + "/llama/config.json"));
    ASSERT_TRUE(config.ok()) << config.status().ToString();
    config_ = *config;
    auto base = LoadDecoderWeights(kLoraFixtures + "/llama", config_);
    ASSERT_TRUE(base.ok()) << base.status().ToString();
    decoder_ = MakeAtenDecoder(*base, /*fast_decode=*/GetParam());
    ASSERT_TRUE(decoder_->AllocateCache(kLoraBlocks, kLoraBlockSize).ok());
    for (const char* name : {"qv", "all", "late"}) {
      auto a = LoadLoraAdapter(kLoraFixtures + "/llama_lora/" + name, config_, LoraLimits{});
      ASSERT_TRUE(a.ok()) << name << ": " << a.status().ToString();
      adapters_.push_back(*a);
      auto merged = LoadDecoderWeights(kLoraFixtures + "/llama_lora/merged_" + name, config_);
      ASSERT_TRUE(merged.ok()) << merged.status().ToString();
      references_.push_back(MakeAtenDecoder(*merged, /*fast_decode=*/false));
    }
    references_.push_back(MakeAtenDecoder(*base, /*fast_decode=*/false));  // the base model's sequence
    for (auto& r : references_) ASSERT_TRUE(r->AllocateCache(kLoraBlocks, kLoraBlockSize).ok());
  }

  static std::vector<int32_t> Table(int first, int n) {
    std::vector<int32_t> t;
    for (int i = 0; i < n; ++i) t.push_back(static_cast<int32_t>((first + 5 * i) % kLoraBlocks));
    return t;
  }

  DecoderConfig config_;
  std::unique_ptr<DecoderModel> decoder_;
  std::vector<std::shared_ptr<const LoraAdapter>> adapters_;
  std::vector<std::unique_ptr<DecoderModel>> references_;  // merged qv, all, late; the base
};

// Four sequences (adapters qv, all, late, none; each prompt different), prefilled together then decoded greedily
// together: every step's logits of each equal its merged model's, run alone.
TEST_P(LoraDecoderTest, BatchedAdaptersEqualMergedModels) {
  const int kSeqs = 4;
  std::vector<std::vector<int32_t>> tokens(kSeqs);
  std::vector<std::vector<int32_t>> tables;
  for (int i = 0; i < kSeqs; ++i) {
    for (int p = 0; p < 9 + i; ++p) tokens[i].push_back(static_cast<int32_t>((7 * p + 13 * i + 3) % 90 + 3));
    tables.push_back(Table(i * 16, 12));
  }
  std::vector<size_t> done(kSeqs, 0);
  const int64_t vocab = config_.vocab_size;
  for (int step = 0; step < 10; ++step) {
    std::vector<StepInput> batch;
    for (int i = 0; i < kSeqs; ++i) {
      StepInput in{std::span<const int32_t>(tokens[i]).subspan(done[i]), static_cast<int64_t>(done[i]), tables[i], 1};
      in.lora = i < 3 ? adapters_[static_cast<size_t>(i)].get() : nullptr;
      batch.push_back(in);
    }
    std::vector<float> logits;
    ASSERT_TRUE(decoder_->Forward(batch, &logits).ok());
    ASSERT_EQ(static_cast<int64_t>(logits.size()), kSeqs * vocab);
    for (int i = 0; i < kSeqs; ++i) {
      StepInput alone = batch[static_cast<size_t>(i)];
      alone.lora = nullptr;
      std::vector<float> want;
      ASSERT_TRUE(references_[static_cast<size_t>(i)]->Forward(std::span(&alone, 1), &want).ok());
      double worst = 0;
      int32_t best = 0, want_best = 0;
      for (int64_t v = 0; v < vocab; ++v) {
        const float g = logits[static_cast<size_t>(i * vocab + v)];
        worst = std::max(worst, static_cast<double>(std::abs(g - want[static_cast<size_t>(v)])));
        if (g > logits[static_cast<size_t>(i * vocab + best)]) best = static_cast<int32_t>(v);
        if (want[static_cast<size_t>(v)] > want[static_cast<size_t>(want_best)]) want_best = static_cast<int32_t>(v);
      }
      EXPECT_LT(worst, 1e-4) << "sequence " << i << ", step " << step;
      EXPECT_EQ(best, want_best) << "sequence " << i << ", step " << step;
      done[i] = tokens[i].size();
      tokens[i].push_back(want_best);
    }
  }
  // The adapters changed something: the base's and an adapter's greedy texts differ.
  EXPECT_NE(std::vector<int32_t>(tokens[0].begin() + 9, tokens[0].end()),
            std::vector<int32_t>(tokens[3].begin() + 12, tokens[3].end()));
}

TEST_P(LoraDecoderTest, RefusesAnAdapterOfAnotherShape) {
  LoraAdapter bad = *adapters_[0];
  bad.layers.pop_back();
  const auto table = Table(0, 4);
  const std::vector<int32_t> toks = {3, 4, 5};
  StepInput in{toks, 0, table, 1};
  in.lora = &bad;
  std::vector<float> logits;
  const Status st = decoder_->Forward(std::span(&in, 1), &logits);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  LoraAdapter wide = *adapters_[0];
  wide.layers[0][static_cast<size_t>(LoraModule::kQ)].in += 1;
  in.lora = &wide;
  EXPECT_EQ(decoder_->Forward(std::span(&in, 1), &logits).code(), StatusCode::kInvalidArgument);
}

// The expand kernel against row-by-row Axpy: lengths across its chunk of 256 and odd ones, k from 1 to 64.
TEST(LoraKernelsTest, AddRowsEqualsOneAxpyPerRow) {
  for (int64_t n : {1, 7, 256, 300, 1408}) {
    for (int64_t k : {1, 3, 8, 64}) {
      std::vector<float> a(static_cast<size_t>(k)), x(static_cast<size_t>(k * n)), y(static_cast<size_t>(n));
      for (size_t i = 0; i < a.size(); ++i) a[i] = 0.25f * static_cast<float>(i % 7) - 0.5f;
      for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 37) % 101) / 50.0f - 1.0f;
      for (size_t i = 0; i < y.size(); ++i) y[i] = static_cast<float>(i % 13);
      std::vector<float> want = y;
      for (int64_t j = 0; j < k; ++j) kernels::Axpy(a[static_cast<size_t>(j)], x.data() + j * n, want.data(), n);
      kernels::AddRows(a.data(), k, x.data(), n, y.data());
      for (int64_t i = 0; i < n; ++i)
        EXPECT_FLOAT_EQ(y[static_cast<size_t>(i)], want[static_cast<size_t>(i)]) << n << " " << k;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Paths, LoraDecoderTest, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "RawBuffers" : "Aten"; });

}  // namespace
}  // namespace inferd::llm
