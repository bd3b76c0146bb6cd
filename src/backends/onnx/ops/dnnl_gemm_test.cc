// The oneDNN matrix products (dnnl_gemm.h) against ATen's reference ops.
#include "backends/onnx/ops/dnnl_gemm.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace inferd::onnxexec::ops {
namespace {

at::Tensor Rand(std::vector<int64_t> shape, uint64_t seed) {
  at::Generator g = at::detail::createCPUGenerator(seed);
  return at::randn(shape, g, at::TensorOptions().dtype(at::kFloat));
}

TEST(PackedGemmTest, MatchesMatMulPlusBiasForEveryRowCountAndBothWeightLayouts) {
  const at::Tensor w = Rand({48, 40}, 1), bias = Rand({40}, 2);
  auto plain = PackedGemm::Make(w, /*transposed=*/false, bias, Epilogue::kNone);
  auto transposed = PackedGemm::Make(w.t().contiguous(), /*transposed=*/true, bias, Epilogue::kNone);
  ASSERT_TRUE(plain && transposed);
  EXPECT_EQ((*plain)->k(), 48);
  EXPECT_EQ((*plain)->n(), 40);
  // Row counts around the packing M (64), and more than the shape cache holds.
  std::vector<int64_t> ms = {1, 2, 7, 63, 64, 65, 200};
  for (int64_t m = 300; ms.size() < kMaxShapes + 8; ++m) ms.push_back(m);
  for (int64_t m : ms) {
    const at::Tensor x = Rand({m, 48}, 3 + m);
    const at::Tensor want = at::matmul(x, w) + bias;
    for (const auto& g : {*plain, *transposed}) {
      auto y = g->Run(x);
      ASSERT_TRUE(y.ok()) << y.status().ToString();
      ASSERT_EQ(y->sizes(), want.sizes());
      EXPECT_TRUE(at::allclose(*y, want, 1e-4, 1e-4)) << "M " << m;
    }
  }
}

TEST(PackedGemmTest, GeluEpilogueMatchesAtenGeluAndStridedInputsAreRead) {
  const at::Tensor w = Rand({32, 24}, 4), bias = Rand({24}, 5);
  auto g = PackedGemm::Make(w, false, bias, Epilogue::kGeluErf);
  ASSERT_TRUE(g);
  const at::Tensor x = Rand({32, 10}, 6).t();  // [10, 32], not contiguous
  auto y = (*g)->Run(x);
  ASSERT_TRUE(y.ok()) << y.status().ToString();
  EXPECT_TRUE(at::allclose(*y, at::gelu(at::matmul(x, w) + bias), 1e-4, 1e-4));
  auto no_bias = PackedGemm::Make(w, false, at::Tensor(), Epilogue::kNone);
  ASSERT_TRUE(no_bias);
  EXPECT_TRUE(at::allclose((*no_bias)->Run(x).value(), at::matmul(x, w), 1e-4, 1e-4));
}

TEST(PackedGemmTest, RefusesWhatItCannotTakeAndReportsWrongInputs) {
  EXPECT_FALSE(PackedGemm::Make(Rand({4, 4}, 7).to(at::kDouble), false, at::Tensor(), Epilogue::kNone));
  EXPECT_FALSE(PackedGemm::Make(Rand({4, 4, 4}, 7), false, at::Tensor(), Epilogue::kNone));
  EXPECT_FALSE(PackedGemm::Make(Rand({4, 0}, 7), false, at::Tensor(), Epilogue::kNone));
  EXPECT_FALSE(PackedGemm::Make(Rand({4, 5}, 7), false, Rand({4}, 8), Epilogue::kNone));  // bias of width K
  auto g = PackedGemm::Make(Rand({4, 5}, 7), false, at::Tensor(), Epilogue::kNone);
  ASSERT_TRUE(g);
  for (const at::Tensor& bad : {Rand({3, 5}, 9), Rand({3, 4}, 9).to(at::kDouble), Rand({4}, 9), Rand({0, 4}, 9)}) {
    auto y = (*g)->Run(bad);
    ASSERT_FALSE(y.ok());
    EXPECT_EQ(y.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(y.status().message().find("[M, 4]"), std::string::npos) << y.status().ToString();
  }
}

TEST(PackedGemmTest, ConcurrentCallsOnNewShapesAgree) {
  const at::Tensor w = Rand({16, 16}, 10);
  auto g = PackedGemm::Make(w, false, at::Tensor(), Epilogue::kNone);
  ASSERT_TRUE(g);
  std::vector<std::thread> threads;
  std::vector<int> wrong(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int64_t m = 1; m <= 24; ++m) {
        const at::Tensor x = Rand({m, 16}, 100 * t + m);
        auto y = (*g)->Run(x);
        if (!y.ok() || !at::allclose(*y, at::matmul(x, w), 1e-4, 1e-4)) ++wrong[t];
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong, std::vector<int>(4, 0));
}

TEST(BatchedMatMulTest, MatchesAtenMatMulForAttentionShapesContiguousOrNot) {
  BatchedMatMul mm;
  const at::Tensor q = Rand({2, 3, 8, 5}, 11), k = Rand({2, 3, 8, 5}, 12);
  // Scores: q k^T with k^T a transposed view (read in place or copied).
  for (const auto& [a, b] : std::vector<std::pair<at::Tensor, at::Tensor>>{
           {q, k.transpose(-1, -2)},
           {q.contiguous(), k.transpose(-1, -2).contiguous()},
           {q.transpose(1, 2).contiguous().transpose(1, 2), k.transpose(-1, -2)},
           {Rand({6, 4}, 13), Rand({4, 9}, 14)}}) {
    auto y = mm.Run(a, b);
    ASSERT_TRUE(y.has_value()) << a.sizes() << " x " << b.sizes();
    ASSERT_TRUE(y->ok()) << y->status().ToString();
    EXPECT_TRUE(at::allclose(y->value(), at::matmul(a, b), 1e-4, 1e-4));
  }
}

TEST(BatchedMatMulTest, LeavesBroadcastingOtherTypesAndEmptyShapesToTheCaller) {
  BatchedMatMul mm;
  EXPECT_FALSE(mm.Run(Rand({2, 3, 4}, 1), Rand({4, 5}, 2)).has_value());     // ranks differ
  EXPECT_FALSE(mm.Run(Rand({2, 3, 4}, 1), Rand({1, 4, 5}, 2)).has_value());  // batch broadcast
  EXPECT_FALSE(mm.Run(Rand({3, 4}, 1), Rand({5, 5}, 2)).has_value());        // K mismatch
  EXPECT_FALSE(mm.Run(Rand({3, 4}, 1).to(at::kDouble), Rand({4, 5}, 2).to(at::kDouble)).has_value());
  EXPECT_FALSE(mm.Run(Rand({0, 3, 4}, 1), Rand({0, 4, 5}, 2)).has_value());
  EXPECT_FALSE(mm.Run(Rand({4}, 1), Rand({4}, 2)).has_value());  // vectors: ATen's matmul
}

}  // namespace
}  // namespace inferd::onnxexec::ops
