// Triton's ragged batching: allow_ragged_batch inputs batch whatever their
// shapes, reach the backend concatenated as 1-D, with the batch inputs the
// config asks for.
#include <gtest/gtest.h>

#include <cstring>

#include "repository/model_config.h"
#include "scheduler/batch_executor.h"
#include "scheduler/batch_queue.h"
#include "server/request_validation.h"
#include "testing/fake_clock.h"
#include "testing/test_requests.h"

namespace inferd {
namespace {

using testing::F32;
using testing::ToFloats;

constexpr const char* kConfig = R"(
max_batch_size: 8
input [ { name: "x" data_type: TYPE_FP32 dims: [ -1 ] allow_ragged_batch: true } ]
output [ { name: "sum" data_type: TYPE_FP32 dims: [ 1 ] } ]
dynamic_batching { max_queue_delay_microseconds: 1000 }
batch_input [
  { kind: BATCH_ELEMENT_COUNT target_name: "count" data_type: TYPE_INT32 source_input: "x" },
  { kind: BATCH_ACCUMULATED_ELEMENT_COUNT target_name: "acc" data_type: TYPE_INT64 source_input: "x" },
  { kind: BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO target_name: "acc0" data_type: TYPE_INT32 source_input: "x" },
  { kind: BATCH_MAX_ELEMENT_COUNT_AS_SHAPE target_name: "max" data_type: TYPE_FP32 source_input: "x" },
  { kind: BATCH_ITEM_SHAPE target_name: "shape" data_type: TYPE_INT32 source_input: "x" },
  { kind: BATCH_ITEM_SHAPE_FLATTEN target_name: "flat" data_type: TYPE_INT32 source_input: "x" }
]
)";

ModelSpec Spec() {
  auto s = ParseModelConfig(kConfig, "m", "m/config.pbtxt");
  EXPECT_TRUE(s.ok()) << s.status().message();
  return *s;
}

std::unique_ptr<PendingRequest> Request(
    const ModelSpec& spec, std::vector<float> x, InferCallback cb = [](Result<InferResponse>) {}) {
  auto p = std::make_unique<PendingRequest>();
  p->request = std::make_unique<InferRequest>();
  p->request->model_name = "m";
  p->request->inputs.push_back(F32("x", {1, static_cast<int64_t>(x.size())}, x));
  auto rows = ValidateAndNormalize(spec, p->request.get());
  EXPECT_TRUE(rows.ok()) << rows.status().message();
  p->rows = 1;
  p->callback = std::move(cb);
  return p;
}

template <typename T>
std::vector<T> Values(const Tensor& t) {
  std::vector<T> v(t.byte_size / sizeof(T));
  if (!v.empty()) std::memcpy(v.data(), t.data, t.byte_size);
  return v;
}

TEST(RaggedBatching, ConfigReadsRaggedInputsAndBatchInputs) {
  const ModelSpec s = Spec();
  EXPECT_TRUE(s.inputs[0].ragged);
  ASSERT_EQ(s.batch_inputs.size(), 6u);
  EXPECT_EQ(s.batch_inputs[1].kind, BatchInputSpec::Kind::kAccumulatedElementCount);
  EXPECT_EQ(s.batch_inputs[1].dtype, DataType::kInt64);
  const std::vector<TensorSpec> backend = s.BackendInputs();
  ASSERT_EQ(backend.size(), 7u);
  EXPECT_EQ(backend[6].name, "flat");
}

TEST(RaggedBatching, RequestsOfDifferentShapesBatchTogether) {
  const ModelSpec spec = Spec();
  BatchQueue q(BatchPolicy::FromSpec(spec, 100));
  const TimePoint t0 = TimePoint(std::chrono::seconds(5));
  for (size_t n : {3u, 1u, 4u}) {
    auto p = Request(spec, std::vector<float>(n, 1.f));
    ASSERT_TRUE(q.Push(p, t0).ok());
  }
  EXPECT_EQ(q.Next(t0 + std::chrono::microseconds(1000)).batch.size(), 3u);
}

TEST(RaggedBatching, ARequestWithSeveralRowsIsRefused) {
  const ModelSpec spec = Spec();
  InferRequest r;
  r.inputs.push_back(F32("x", {2, 3}, {1}));
  auto rows = ValidateAndNormalize(spec, &r);
  ASSERT_FALSE(rows.ok());
  EXPECT_NE(rows.status().message().find("batch size 1"), std::string::npos);
}

// Sums each request's elements using the accumulated counts, and records its inputs.
class RaggedInstance final : public ModelInstance {
 public:
  Result<std::vector<Tensor>> Execute(const std::vector<Tensor>& inputs) override {
    seen = inputs;
    const std::vector<float> x = ToFloats(inputs[0]);
    const std::vector<int32_t> acc0 = Values<int32_t>(inputs[3]);
    std::vector<float> sums;
    for (size_t r = 0; r + 1 < acc0.size(); ++r) {
      float s = 0;
      for (int32_t i = acc0[r]; i < acc0[r + 1]; ++i) s += x[static_cast<size_t>(i)];
      sums.push_back(s);
    }
    return std::vector<Tensor>{F32("sum", {static_cast<int64_t>(sums.size()), 1}, sums)};
  }
  std::vector<Tensor> seen;
};

TEST(RaggedBatching, TheBackendGetsTheElementsConcatenatedAndTheBatchInputs) {
  const ModelSpec spec = Spec();
  testing::FakeClock clock;
  std::vector<Result<InferResponse>> answers;
  auto keep = [&answers](Result<InferResponse> r) { answers.push_back(std::move(r)); };
  std::vector<std::unique_ptr<PendingRequest>> batch;
  batch.push_back(Request(spec, {1, 2, 3}, keep));
  batch.push_back(Request(spec, {10}, keep));
  batch.push_back(Request(spec, {100, 200}, keep));
  RaggedInstance instance;
  ExecuteBatch(instance, spec, batch, nullptr, clock);
  ASSERT_EQ(instance.seen.size(), 7u);
  EXPECT_EQ(instance.seen[0].shape, (Shape{6}));
  EXPECT_EQ(ToFloats(instance.seen[0]), (std::vector<float>{1, 2, 3, 10, 100, 200}));
  EXPECT_EQ(instance.seen[1].name, "count");
  EXPECT_EQ(Values<int32_t>(instance.seen[1]), (std::vector<int32_t>{3, 1, 2}));
  EXPECT_EQ(Values<int64_t>(instance.seen[2]), (std::vector<int64_t>{3, 4, 6}));
  EXPECT_EQ(Values<int32_t>(instance.seen[3]), (std::vector<int32_t>{0, 3, 4, 6}));
  EXPECT_EQ(instance.seen[4].shape, (Shape{3}));  // the max element count, as a shape
  EXPECT_EQ(instance.seen[4].dtype, DataType::kFp32);
  EXPECT_EQ(instance.seen[5].shape, (Shape{3, 1}));
  EXPECT_EQ(Values<int32_t>(instance.seen[5]), (std::vector<int32_t>{3, 1, 2}));
  EXPECT_EQ(instance.seen[6].shape, (Shape{3}));
  ASSERT_EQ(answers.size(), 3u);
  const std::vector<float> want = {6, 10, 300};
  for (size_t i = 0; i < 3; ++i) {
    ASSERT_TRUE(answers[i].ok()) << answers[i].status().message();
    EXPECT_EQ(ToFloats(answers[i]->outputs[0]), (std::vector<float>{want[i]}));
  }
}

}  // namespace
}  // namespace inferd
