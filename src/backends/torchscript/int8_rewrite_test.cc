// The int8 rewrite of frozen TorchScript modules (int8_rewrite.h): which
// products become int8, and that the answers stay close to FP32's.
#include "backends/torchscript/int8_rewrite.h"

#include <gtest/gtest.h>

#include "backends/torchscript/optimize.h"

namespace inferd::torchscript {
namespace {

at::Tensor RandnTs(std::vector<int64_t> shape, uint64_t seed, double scale) {
  at::Generator g = at::detail::createCPUGenerator(seed);
  return at::randn(shape, g, at::TensorOptions().dtype(at::kFloat)) * scale;
}

int Count(const torch::jit::Module& m, const char* kind) {
  int n = 0;
  auto graph = m.get_method("forward").graph();
  for (auto* node : graph->nodes()) n += node->kind() == c10::Symbol::fromQualString(kind) ? 1 : 0;
  return n;
}

// x -> linear(64 -> 128) -> relu -> x @ W (128 -> 10) -> + a run-time bias; img -> conv 3x3 + relu -> conv 1x1.
torch::jit::Module Mlp() {
  torch::jit::Module m("m");
  m.register_parameter("w1", RandnTs({128, 64}, 1, 0.1), false);
  m.register_parameter("b1", RandnTs({128}, 2, 0.1), false);
  m.register_parameter("w2", RandnTs({128, 10}, 3, 0.1), false);
  m.register_parameter("wc", RandnTs({8, 1, 3, 3}, 4, 0.3), false);
  m.register_parameter("bc", RandnTs({8}, 10, 0.1), false);
  m.register_parameter("wd", RandnTs({4, 8, 1, 1}, 11, 0.3), false);
  m.define(R"(
def forward(self, x, img):
    h = torch.relu(torch.linear(x, self.w1, self.b1))
    y = torch.matmul(h, self.w2)
    z = torch.linear(h, self.w2.t(), x.sum() * self.b1[:10])
    c = torch.conv2d(torch.relu(torch.conv2d(img, self.wc, self.bc, [1, 1], [1, 1])), self.wd)
    return y + z, c
)");
  m.eval();
  return m;
}

TEST(Int8RewriteTest, ConstantLinearProductsAndConvolutionsBecomeInt8AndAgreeWithFp32) {
  torch::jit::Module plain = Mlp();
  torch::jit::Module frozen = torch::jit::freeze(plain);
  const Int8Rewrite r = RewriteLinearsToInt8(frozen);
  // linear(x, w1, b1), matmul(h, w2) and both convolutions (the first with its ReLU); the third product's bias is
  // computed per call, so it stays FP32.
  EXPECT_EQ(r.layers, 4);
  EXPECT_EQ(r.float_bytes, 4 * (128 * 64 + 128 * 10 + 8 * 1 * 3 * 3 + 4 * 8 * 1 * 1));
  EXPECT_LT(r.quantized_bytes, r.float_bytes / 3);
  EXPECT_EQ(Count(frozen, "inferd::int8_linear"), 2);
  EXPECT_EQ(Count(frozen, "inferd::int8_conv2d"), 2);
  EXPECT_EQ(Count(frozen, "aten::linear"), 1);
  EXPECT_EQ(Count(frozen, "aten::conv2d"), 0);
  EXPECT_EQ(Count(frozen, "aten::relu"), 1);  // the MLP's; the convolution's is fused
  const at::Tensor x = RandnTs({16, 64}, 5, 1.0), img = RandnTs({2, 1, 8, 8}, 6, 1.0);
  torch::NoGradGuard no_grad;
  auto want = plain.forward({x, img}).toTuple();
  auto got = torch::jit::optimize_for_inference(frozen).forward({x, img}).toTuple();
  for (int i = 0; i < 2; ++i) {
    const at::Tensor a = want->elements()[i].toTensor(), b = got->elements()[i].toTensor();
    ASSERT_EQ(a.sizes(), b.sizes()) << i;
    const double rel = (a - b).norm().item<double>() / a.norm().item<double>();
    EXPECT_LT(rel, 0.03) << i;
    EXPECT_GT(rel, 0.0) << i;  // int8 really ran
  }
  // Leading dimensions keep their shapes.
  auto y3 = frozen.forward({RandnTs({2, 3, 64}, 7, 1.0), img}).toTuple()->elements()[0].toTensor();
  EXPECT_EQ(y3.sizes(), (std::vector<int64_t>{2, 3, 10}));
  // A wrong input is an error, not a crash.
  EXPECT_THROW(frozen.forward({RandnTs({2, 63}, 8, 1.0), img}), std::exception);
  EXPECT_THROW(frozen.forward({x, RandnTs({2, 2, 8, 8}, 9, 1.0)}), std::exception);
}

TEST(Int8RewriteTest, ConvolutionsAnswerContiguouslyWhereTheGraphViews) {
  // A classic CNN head: conv -> relu -> view(N, -1) -> linear. A view of a channels-last tensor would fail.
  torch::jit::Module m("m");
  m.register_parameter("wc", RandnTs({8, 3, 3, 3}, 20, 0.3), false);
  m.register_parameter("wl", RandnTs({4, 8 * 6 * 6}, 21, 0.05), false);
  m.define(R"(
def forward(self, img):
    c = torch.relu(torch.conv2d(img, self.wc))
    return torch.linear(c.view(c.size(0), -1), self.wl)
)");
  m.eval();
  torch::jit::Module frozen = torch::jit::freeze(m);
  EXPECT_EQ(RewriteLinearsToInt8(frozen).layers, 2);
  const at::Tensor img = RandnTs({2, 3, 8, 8}, 22, 1.0);
  torch::NoGradGuard no_grad;
  const at::Tensor want = m.forward({img}).toTensor();
  at::Tensor got;
  ASSERT_NO_THROW(got = frozen.forward({img}).toTensor());
  EXPECT_LT((got - want).norm().item<double>() / want.norm().item<double>(), 0.03);
}

TEST(Int8RewriteTest, OptimizeForInferenceQuantizesOnlyWhenAsked) {
  ModelSpec spec;
  spec.name = "m";
  spec.max_batch_size = 4;
  TensorSpec x;
  x.name = "x";
  x.dtype = DataType::kFp32;
  x.dims = {64};
  TensorSpec img;
  img.name = "img";
  img.dtype = DataType::kFp32;
  img.dims = {1, 8, 8};
  spec.inputs = {x, img};
  auto plain = std::make_shared<torch::jit::Module>(Mlp());
  Optimized fp32 = OptimizeForInference(plain, spec, {0, 1}, 2);
  EXPECT_TRUE(fp32.optimized) << fp32.why_not;
  EXPECT_EQ(fp32.int8.layers, 0);
  Optimized int8 = OptimizeForInference(plain, spec, {0, 1}, 2, /*int8=*/true);
  EXPECT_TRUE(int8.optimized) << int8.why_not;  // the FP32 tolerance is not asked of int8
  EXPECT_EQ(int8.int8.layers, 4);
  EXPECT_GT(int8.max_abs_diff, 0.0);
}

}  // namespace
}  // namespace inferd::torchscript
