#include "core/batching_spec.h"

#include <gtest/gtest.h>

#include <cstring>

#include "core/model_spec.h"
#include "core/padding.h"

namespace inferd {
namespace {

ModelSpec Encoder() {
  ModelSpec m;
  m.name = "enc";
  m.max_batch_size = 8;
  m.batching.dynamic = true;
  m.batching.max_queue_delay_us = 500;
  m.inputs.push_back(TensorSpec{"tokens", DataType::kInt64, {-1}});
  m.inputs.push_back(TensorSpec{"mask", DataType::kInt64, {-1}});
  m.inputs.push_back(TensorSpec{"text", DataType::kBytes, {-1}});
  m.inputs.push_back(TensorSpec{"image", DataType::kFp32, {3, -1, -1}});
  m.inputs.push_back(TensorSpec{"frames", DataType::kFp32, {4, -1}});
  m.outputs.push_back(TensorSpec{"hidden", DataType::kFp32, {-1, 32}});
  m.outputs.push_back(TensorSpec{"logits", DataType::kFp32, {2}});
  return m;
}

TEST(BatchingSpec, NothingSetIsFixedWithoutPadding) {
  auto b = ParseBatchingParameters({{"features.x", "y"}}, Encoder());
  ASSERT_TRUE(b.ok());
  EXPECT_FALSE(b->adaptive.enabled);
  EXPECT_FALSE(b->padding.has_value());
}

TEST(BatchingSpec, AdaptiveTakesItsBudgetFromTheDelayOrItsOwnSetting) {
  auto b = ParseBatchingParameters({{"batching.mode", "adaptive"}}, Encoder());
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_TRUE(b->adaptive.enabled);
  EXPECT_EQ(b->adaptive.max_delay_us, 500u);
  b = ParseBatchingParameters(
      {{"batching.mode", "adaptive"}, {"batching.max_delay_us", "2000"}, {"batching.latency_target_us", "9000"}},
      Encoder());
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->adaptive.max_delay_us, 2000u);
  EXPECT_EQ(b->adaptive.latency_target_us, 9000u);
  EXPECT_FALSE(b->adaptive.cpu_aware);  // the default
  b = ParseBatchingParameters({{"batching.mode", "adaptive"}, {"batching.cpu_aware", "true"}}, Encoder());
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(b->adaptive.cpu_aware);
  ModelSpec no_delay = Encoder();
  no_delay.batching.max_queue_delay_us = 0;
  b = ParseBatchingParameters({{"batching.mode", "adaptive"}}, no_delay);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->adaptive.max_delay_us, 10000u);
}

TEST(BatchingSpec, PaddingFindsTheVariableAxisAndKeepsTheMaskLast) {
  auto b = ParseBatchingParameters({{"batching.pad_inputs", "frames:-1.5, tokens:3"},
                                    {"batching.mask_input", "mask"},
                                    {"batching.buckets", "16,32,64"}},
                                   Encoder());
  ASSERT_TRUE(b.ok()) << b.status().message();
  const PaddingSpec& p = *b->padding;
  ASSERT_EQ(p.inputs.size(), 3u);
  EXPECT_EQ(p.inputs[0].name, "frames");
  EXPECT_EQ(p.inputs[0].axis, 2u);  // [batch, 4, -1]
  EXPECT_EQ(p.inputs[0].pad_value, -1.5);
  float f = 0;
  ASSERT_EQ(p.inputs[0].pad_bytes.size(), 4u);
  std::memcpy(&f, p.inputs[0].pad_bytes.data(), 4);
  EXPECT_EQ(f, -1.5f);
  EXPECT_EQ(p.inputs[1].input, 0u);
  EXPECT_EQ(p.inputs[1].axis, 1u);
  ASSERT_NE(p.mask(), nullptr);
  EXPECT_EQ(p.mask()->name, "mask");
  EXPECT_EQ(p.mask()->pad_bytes, std::string(8, '\0'));
  EXPECT_EQ(p.buckets, (std::vector<int64_t>{16, 32, 64}));
  EXPECT_EQ(p.unpad_outputs, (std::vector<std::string>{"hidden"}));  // dims start with -1
  EXPECT_EQ(p.PaddedLength(1), 16);
  EXPECT_EQ(p.PaddedLength(17), 32);
  EXPECT_EQ(p.PaddedLength(65), 65);  // beyond the buckets: the longest
  EXPECT_EQ(p.Group(16), 16);
  EXPECT_EQ(p.Group(100), 100);  // beyond the buckets: only its own length
  EXPECT_EQ(p.RateKey(p.Group(100)), -1);
  EXPECT_EQ(p.RateKey(p.Group(20)), 32);
}

TEST(BatchingSpec, RefusesWhatCannotBePadded) {
  struct Case {
    std::map<std::string, std::string> params;
    std::string why;
  };
  const std::vector<Case> cases = {
      {{{"batching.mode", "fast"}}, "not fixed or adaptive"},
      {{{"batching.max_delay_us", "5"}}, "adaptive only"},
      {{{"batching.cpu_aware", "true"}}, "adaptive only"},
      {{{"batching.mode", "adaptive"}, {"batching.cpu_aware", "yes"}}, "not true or false"},
      {{{"batching.mode", "adaptive"}, {"batching.max_delay_us", "0"}}, "out of range"},
      {{{"batching.pad_inputs", "nope"}}, "not an input"},
      {{{"batching.pad_inputs", "text"}}, "BYTES"},
      {{{"batching.pad_inputs", "image"}}, "exactly one variable"},
      {{{"batching.pad_inputs", "tokens:1.5"}}, "does not fit"},
      {{{"batching.pad_inputs", "tokens:x"}}, "not a number"},
      {{{"batching.pad_inputs", "tokens,tokens"}}, "listed twice"},
      {{{"batching.pad_inputs", "tokens"}, {"batching.mask_input", "tokens"}}, "also in"},
      {{{"batching.pad_inputs", "tokens"}, {"batching.mask_input", "frames"}}, "[ -1 ]"},
      {{{"batching.pad_inputs", "tokens"}, {"batching.buckets", "32,16"}}, "ascending"},
      {{{"batching.pad_inputs", "tokens"}, {"batching.buckets", "0"}}, "out of range"},
      {{{"batching.pad_inputs", "tokens"}, {"batching.unpad_outputs", "nope"}}, "not an output"},
      {{{"batching.mask_input", "mask"}}, "needs batching.pad_inputs"},
      {{{"batching.bucket", "16"}}, "unknown setting"},
  };
  for (const auto& c : cases) {
    auto b = ParseBatchingParameters(c.params, Encoder());
    ASSERT_FALSE(b.ok()) << c.why;
    EXPECT_NE(b.status().message().find(c.why), std::string::npos) << b.status().message();
    EXPECT_NE(b.status().message().find("parameters.batching."), std::string::npos) << b.status().message();
  }
  ModelSpec unbatched = Encoder();
  unbatched.batching.dynamic = false;
  EXPECT_FALSE(ParseBatchingParameters({{"batching.pad_inputs", "tokens"}}, unbatched).ok());
  EXPECT_FALSE(ParseBatchingParameters({{"batching.mode", "adaptive"}}, unbatched).ok());
}

Tensor I64(std::string name, Shape shape, std::vector<int64_t> v) {
  return Tensor::Copy(std::move(name), DataType::kInt64, std::move(shape),
                      std::span<const std::byte>(reinterpret_cast<const std::byte*>(v.data()), v.size() * 8));
}
std::vector<int64_t> Values(const Tensor& t) {
  std::vector<int64_t> v(t.byte_size / 8);
  std::memcpy(v.data(), t.data, t.byte_size);
  return v;
}

TEST(Padding, PadConcatPadsEachPartAlongItsAxisAndCutAxisUndoesIt) {
  const std::string pad(8, '\x01');  // int64 0x0101010101010101
  const int64_t P = 0x0101010101010101;
  Tensor a = I64("t", {1, 2}, {1, 2});
  Tensor b = I64("t", {2, 3}, {3, 4, 5, 6, 7, 8});
  auto t = PadConcat({&a, &b}, 1, 4, pad, "t");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->shape, (Shape{3, 4}));
  EXPECT_EQ(Values(*t), (std::vector<int64_t>{1, 2, P, P, 3, 4, 5, P, 6, 7, 8, P}));
  auto rows = t->SliceRows(1, 2);
  ASSERT_TRUE(rows.ok());
  auto cut = CutAxis(*rows, 1, 3);
  ASSERT_TRUE(cut.ok());
  EXPECT_EQ(cut->shape, (Shape{2, 3}));
  EXPECT_EQ(Values(*cut), (std::vector<int64_t>{3, 4, 5, 6, 7, 8}));
  // A middle axis: [rows, 2, len] padded along 2.
  Tensor c = I64("c", {1, 2, 1}, {9, 10});
  auto m = PadConcat({&c}, 2, 2, std::string(8, '\0'), "c");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(Values(*m), (std::vector<int64_t>{9, 0, 10, 0}));
}

TEST(Padding, RefusesMismatchedParts) {
  const std::string pad(8, '\0');
  Tensor a = I64("t", {1, 2}, {1, 2});
  Tensor longer = I64("t", {1, 5}, {1, 2, 3, 4, 5});
  EXPECT_FALSE(PadConcat({&a, &longer}, 1, 4, pad, "t").ok());  // longer than the padded length
  Tensor other_rank = I64("t", {1, 2, 1}, {1, 2});
  EXPECT_FALSE(PadConcat({&a, &other_rank}, 1, 4, pad, "t").ok());
  EXPECT_FALSE(PadConcat({&a}, 0, 4, pad, "t").ok());
  EXPECT_FALSE(PadConcat({&a}, 1, 4, std::string(4, '\0'), "t").ok());  // pad element of the wrong size
  EXPECT_FALSE(CutAxis(a, 1, 3).ok());
  Tensor filled = FilledTensor("m", DataType::kInt64, {2, 3}, std::string("\x01\0\0\0\0\0\0\0", 8));
  EXPECT_EQ(Values(filled), (std::vector<int64_t>(6, 1)));
}

}  // namespace
}  // namespace inferd
