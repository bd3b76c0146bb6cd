// oneDNN convolutions and pooling (dnnl_conv.h) against ATen's reference ops.
#include "backends/onnx/ops/dnnl_conv.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

namespace inferd::onnxexec::ops {
namespace {

at::Tensor Noise(std::vector<int64_t> shape, uint64_t seed) {
  at::Generator g = at::detail::createCPUGenerator(seed);
  return at::randn(shape, g, at::TensorOptions().dtype(at::kFloat));
}

struct Case {
  std::string name;
  int64_t in_c, out_c, k, stride, pad, dilation, groups;
  bool bias, relu;
};

TEST(PackedConv2dTest, MatchesAtenConv2dForEveryGeometryAndBatch) {
  const std::vector<Case> cases = {
      {"3x3 stride 1 (Winograd where oneDNN has it)", 32, 32, 3, 1, 1, 1, 1, true, true},
      {"3x3 stride 2", 16, 32, 3, 2, 1, 1, 1, true, false},
      {"1x1 stride 2, no bias", 16, 24, 1, 2, 0, 1, 1, false, false},
      {"7x7 stride 2 on 3 channels", 3, 16, 7, 2, 3, 1, 1, true, true},
      {"grouped", 8, 8, 3, 1, 1, 1, 2, true, false},
      {"dilated", 8, 8, 3, 1, 2, 2, 1, false, true},
  };
  for (const Case& c : cases) {
    const at::Tensor w = Noise({c.out_c, c.in_c / c.groups, c.k, c.k}, 1).mul(0.2);
    const at::Tensor b = c.bias ? Noise({c.out_c}, 2) : at::Tensor();
    ConvGeometry g;
    g.strides = {c.stride, c.stride};
    g.padding = {c.pad, c.pad};
    g.dilations = {c.dilation, c.dilation};
    g.groups = c.groups;
    g.relu = c.relu;
    auto conv = PackedConv2d::Make(w, b, g);
    ASSERT_TRUE(conv) << c.name;
    EXPECT_EQ((*conv)->in_channels(), c.in_c);
    for (int64_t n : {1, 8}) {  // oneDNN picks other kernels (and Winograd tiles) for larger batches
      const at::Tensor x = Noise({n, c.in_c, 20, 20}, 3 + n);
      at::Tensor want = at::conv2d(x, w, b, {c.stride, c.stride}, {c.pad, c.pad}, {c.dilation, c.dilation}, c.groups);
      if (c.relu) want = at::relu(want);
      auto y = (*conv)->Run(x);
      ASSERT_TRUE(y.ok()) << c.name << ": " << y.status().ToString();
      ASSERT_EQ(y->sizes(), want.sizes()) << c.name;
      EXPECT_TRUE(at::allclose(*y, want, 1e-4, 1e-4))
          << c.name << " batch " << n << " (" << (*conv)->ImplFor(x.sizes().vec()) << "): max error "
          << (*y - want).abs().max().item<float>();
    }
  }
}

TEST(PackedConv2dTest, ReportsInputsThatDoNotFitAndRefusesWhatItCannotPack) {
  auto conv = PackedConv2d::Make(Noise({4, 3, 3, 3}, 1), at::Tensor(), ConvGeometry{});
  ASSERT_TRUE(conv);
  for (const at::Tensor& bad : {Noise({1, 2, 8, 8}, 2), Noise({1, 3, 2, 8}, 2), Noise({3, 8, 8}, 2),
                                Noise({1, 3, 8, 8}, 2).to(at::kDouble), Noise({0, 3, 8, 8}, 2)}) {
    auto y = (*conv)->Run(bad);
    ASSERT_FALSE(y.ok()) << bad.sizes();
    EXPECT_EQ(y.status().code(), StatusCode::kInvalidArgument);
  }
  EXPECT_FALSE(PackedConv2d::Make(Noise({4, 3, 3, 3}, 1).to(at::kDouble), at::Tensor(), ConvGeometry{}));
  EXPECT_FALSE(PackedConv2d::Make(Noise({4, 3, 3}, 1), at::Tensor(), ConvGeometry{}));
  EXPECT_FALSE(PackedConv2d::Make(Noise({4, 3, 3, 3}, 1), Noise({3}, 2), ConvGeometry{}));  // bias of 3 for 4 outputs
  ConvGeometry groups;
  groups.groups = 3;  // 4 outputs in 3 groups
  EXPECT_FALSE(PackedConv2d::Make(Noise({4, 3, 3, 3}, 1), at::Tensor(), groups));
}

TEST(PackedConv2dTest, WinogradOnlyWhereAskedAndTheSameAnswerWithout) {
  const at::Tensor w = Noise({32, 32, 3, 3}, 30).mul(0.1);
  ConvGeometry g;
  g.padding = {1, 1};
  g.winograd = false;
  auto direct = PackedConv2d::Make(w, at::Tensor(), g);
  g.winograd = true;
  auto wino = PackedConv2d::Make(w, at::Tensor(), g);
  ASSERT_TRUE(direct && wino);
  const at::Tensor x = Noise({2, 32, 14, 14}, 31);
  EXPECT_EQ((*direct)->ImplFor(x.sizes().vec()).find("wino"), std::string::npos);
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) {  // oneDNN's f32 Winograd kernels are AVX-512 ones
    EXPECT_NE((*wino)->ImplFor(x.sizes().vec()).find("wino"), std::string::npos) << (*wino)->ImplFor(x.sizes().vec());
  }
  EXPECT_TRUE(at::allclose((*direct)->Run(x).value(), (*wino)->Run(x).value(), 1e-4, 1e-4));
}

TEST(PackedConv2dTest, ConcurrentCallsOnNewShapesAgree) {
  // A model's instances share one plan: new shapes (and so new primitives and weight layouts) arrive at once.
  const at::Tensor w = Noise({8, 8, 3, 3}, 20).mul(0.2);
  ConvGeometry g;
  g.padding = {1, 1};
  auto conv = PackedConv2d::Make(w, at::Tensor(), g);
  ASSERT_TRUE(conv);
  std::vector<std::thread> threads;
  std::vector<int> wrong(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int64_t n = 1; n <= 4; ++n) {
        for (int64_t side : {6, 9, 12}) {
          const at::Tensor x = Noise({n, 8, side, side}, 100 * t + 10 * n + side);
          auto y = (*conv)->Run(x);
          if (!y.ok() || !at::allclose(*y, at::conv2d(x, w, {}, 1, 1), 1e-4, 1e-4)) ++wrong[t];
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong, std::vector<int>(4, 0));
}

TEST(MaxPool2dTest, MatchesAtenAndLeavesWhatDoesNotFitToTheCaller) {
  MaxPool2d pool({3, 3}, {2, 2}, {1, 1});
  for (int64_t n : {1, 3}) {
    const at::Tensor x = Noise({n, 5, 17, 12}, 7 + n);
    auto y = pool.Run(x);
    ASSERT_TRUE(y.has_value());
    ASSERT_TRUE(y->ok()) << y->status().ToString();
    EXPECT_TRUE(at::equal(y->value(), at::max_pool2d(x, {3, 3}, {2, 2}, {1, 1})));
    // Channels last (the int8 convolutions' outputs) in, channels last out, the same values.
    auto last = pool.Run(x.contiguous(at::MemoryFormat::ChannelsLast));
    ASSERT_TRUE(last.has_value() && last->ok());
    EXPECT_TRUE(last->value().is_contiguous(at::MemoryFormat::ChannelsLast));
    EXPECT_TRUE(at::equal(last->value(), y->value()));
  }
  EXPECT_FALSE(MaxPool2d({3, 3}, {2, 2}, {0, 0}).Run(Noise({1, 1, 2, 2}, 1)).has_value());  // the window does not fit
  EXPECT_FALSE(pool.Run(Noise({1, 5, 9}, 1)).has_value());
  EXPECT_FALSE(pool.Run(Noise({1, 1, 9, 9}, 1).to(at::kDouble)).has_value());
}

}  // namespace
}  // namespace inferd::onnxexec::ops
