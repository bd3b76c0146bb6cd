// Sequence bucketing: the queue groups lengths, the executor pads the batch
// and cuts each request's outputs back to its own length.
#include <gtest/gtest.h>

#include <mutex>

#include "core/model_spec.h"
#include "scheduler/batch_executor.h"
#include "scheduler/batch_queue.h"
#include "server/request_validation.h"
#include "testing/fake_clock.h"
#include "testing/test_requests.h"

namespace inferd {
namespace {

using std::chrono::microseconds;
using testing::F32;
using testing::Pending;
using testing::ToFloats;

const TimePoint kPadT0 = TimePoint(std::chrono::seconds(100));

// Model "m": x [-1] padded with -1, mask [-1] (FP32), y [-1, 2] cut back, s [1] not.
ModelSpec Spec(std::vector<int64_t> buckets) {
  ModelSpec s;
  s.name = "m";
  s.max_batch_size = 8;
  s.batching.dynamic = true;
  s.batching.max_queue_delay_us = 1000;
  s.inputs.push_back({"x", DataType::kFp32, {-1}});
  s.inputs.push_back({"mask", DataType::kFp32, {-1}});
  s.outputs.push_back({"y", DataType::kFp32, {-1, 2}});
  s.outputs.push_back({"s", DataType::kFp32, {1}});
  std::map<std::string, std::string> params = {{"batching.pad_inputs", "x:-1"}, {"batching.mask_input", "mask"}};
  std::string b;
  for (int64_t v : buckets) b += (b.empty() ? "" : ",") + std::to_string(v);
  if (!b.empty()) params["batching.buckets"] = b;
  auto parsed = ParseBatchingParameters(params, s);
  EXPECT_TRUE(parsed.ok()) << parsed.status().message();
  s.batching.padding = parsed->padding;
  return s;
}

// A request of `len` positions, x = base + position, the mask left out (filled by validation).
std::unique_ptr<PendingRequest> Request(
    const ModelSpec& spec, int64_t len, float base, InferCallback cb = [](Result<InferResponse>) {}) {
  auto p = std::make_unique<PendingRequest>();
  p->request = std::make_unique<InferRequest>();
  p->request->model_name = "m";
  std::vector<float> v;
  for (int64_t i = 0; i < len; ++i) v.push_back(base + static_cast<float>(i));
  p->request->inputs.push_back(F32("x", {1, len}, v));
  auto rows = ValidateAndNormalize(spec, p->request.get());
  EXPECT_TRUE(rows.ok()) << rows.status().message();
  p->rows = 1;
  p->callback = std::move(cb);
  return p;
}

std::vector<int64_t> Lengths(const BatchQueue::Decision& d) {
  std::vector<int64_t> out;
  for (const auto& p : d.batch) out.push_back(p->length);
  return out;
}

TEST(PaddedBatching, ValidationFillsTheMaskWithOnesOfTheRequestsLength) {
  const ModelSpec spec = Spec({});
  auto p = Request(spec, 3, 0);
  ASSERT_EQ(p->request->inputs.size(), 2u);
  EXPECT_EQ(p->request->inputs[1].name, "mask");
  EXPECT_EQ(p->request->inputs[1].shape, (Shape{1, 3}));
  EXPECT_EQ(ToFloats(p->request->inputs[1]), (std::vector<float>{1, 1, 1}));
}

TEST(PaddedBatching, DifferentLengthsBatchTogetherWithoutBuckets) {
  const ModelSpec spec = Spec({});
  BatchQueue q(BatchPolicy::FromSpec(spec, 100));
  for (int64_t len : {5, 40, 7}) {
    auto p = Request(spec, len, 0);
    ASSERT_TRUE(q.Push(p, kPadT0).ok());
  }
  auto d = q.Next(kPadT0 + microseconds(1000));
  EXPECT_EQ(Lengths(d), (std::vector<int64_t>{5, 40, 7}));
  EXPECT_EQ(d.padded_length, 40);
}

TEST(PaddedBatching, BucketsGroupSimilarLengthsAndLeaveTheRestInPlace) {
  const ModelSpec spec = Spec({16, 64});
  BatchQueue q(BatchPolicy::FromSpec(spec, 100));
  for (int64_t len : {5, 40, 7, 33, 10, 200, 300, 200}) {
    auto p = Request(spec, len, 0);
    ASSERT_TRUE(q.Push(p, kPadT0).ok());
  }
  EXPECT_TRUE(q.Next(kPadT0).batch.empty());  // the head's bucket waits for the delay
  auto d = q.Next(kPadT0 + microseconds(1000));
  EXPECT_EQ(Lengths(d), (std::vector<int64_t>{5, 7, 10}));
  EXPECT_EQ(d.padded_length, 16);
  d = q.Next(kPadT0 + microseconds(1000));
  EXPECT_EQ(Lengths(d), (std::vector<int64_t>{40, 33}));
  EXPECT_EQ(d.padded_length, 64);
  d = q.Next(kPadT0 + microseconds(1000));
  EXPECT_EQ(Lengths(d), (std::vector<int64_t>{200, 200}));  // beyond the buckets: only equal lengths
  EXPECT_EQ(d.padded_length, 200);
  d = q.Next(kPadT0 + microseconds(1000));
  EXPECT_EQ(Lengths(d), (std::vector<int64_t>{300}));  // never pads the others up to 300
  EXPECT_TRUE(q.empty());
}

TEST(PaddedBatching, AFullBucketGoesWhileTheHeadsBucketWaits) {
  const ModelSpec spec = Spec({16, 64});
  BatchQueue q(BatchPolicy::FromSpec(spec, 100));
  auto head = Request(spec, 3, 0);
  ASSERT_TRUE(q.Push(head, kPadT0).ok());
  for (int i = 0; i < 8; ++i) {
    auto p = Request(spec, 50, 0);
    ASSERT_TRUE(q.Push(p, kPadT0).ok());
  }
  auto d = q.Next(kPadT0);
  EXPECT_EQ(d.batch.size(), 8u);
  EXPECT_EQ(d.padded_length, 64);
  d = q.Next(kPadT0);
  EXPECT_TRUE(d.batch.empty());  // the head still waits for its delay
  EXPECT_EQ(Lengths(q.Next(kPadT0 + microseconds(1000))), (std::vector<int64_t>{3}));
}

TEST(PaddedBatching, ACancelledRequestDeepInTheQueueIsNotGathered) {
  const ModelSpec spec = Spec({16, 64});
  BatchQueue q(BatchPolicy::FromSpec(spec, 100));
  auto head = Request(spec, 3, 0);
  ASSERT_TRUE(q.Push(head, kPadT0).ok());
  for (int i = 0; i < 7; ++i) {  // another bucket, not full: more than a batch's reach of live rows
    auto p = Request(spec, 50, 0);
    ASSERT_TRUE(q.Push(p, kPadT0).ok());
  }
  auto flag = std::make_shared<Cancellation>();
  auto gone = Request(spec, 4, 0);
  gone->request->cancellation = flag;
  ASSERT_TRUE(q.Push(gone, kPadT0).ok());
  auto kept = Request(spec, 5, 0);
  ASSERT_TRUE(q.Push(kept, kPadT0).ok());
  flag->Cancel();
  auto d = q.Next(kPadT0 + microseconds(1000));
  EXPECT_EQ(Lengths(d), (std::vector<int64_t>{3, 5}));
}

// Answers y[b, i] = (x[b, i] * 2, mask[b, i]) and s[b] = sum of x over the
// unmasked positions; records the padded inputs it saw.
class PaddingInstance final : public ModelInstance {
 public:
  Result<std::vector<Tensor>> Execute(const std::vector<Tensor>& inputs) override {
    seen = inputs;
    const Tensor& x = inputs[0];
    const Tensor& m = inputs[1];
    const int64_t b = x.shape[0], l = x.shape[1];
    std::vector<float> xv = ToFloats(x), mv = ToFloats(m), y, s;
    for (int64_t r = 0; r < b; ++r) {
      float sum = 0;
      for (int64_t i = 0; i < l; ++i) {
        const float xi = xv[static_cast<size_t>(r * l + i)], mi = mv[static_cast<size_t>(r * l + i)];
        y.push_back(xi * 2);
        y.push_back(mi);
        sum += xi * mi;
      }
      s.push_back(sum);
    }
    return std::vector<Tensor>{F32("y", {b, l, 2}, y), F32("s", {b, 1}, s)};
  }
  std::vector<Tensor> seen;
};

TEST(PaddedBatching, ExecutionPadsTheBatchAndEachAnswerIsTheRequestsOwn) {
  const ModelSpec spec = Spec({8});
  testing::FakeClock clock;
  auto stats = std::make_shared<ModelStats>("m", "1", 8);
  stats->EnableBatching();  // as the DynamicBatcher of a padded model does
  std::vector<Result<InferResponse>> answers;
  std::vector<std::unique_ptr<PendingRequest>> batch;
  const std::vector<int64_t> lengths = {2, 5, 1};
  for (size_t i = 0; i < lengths.size(); ++i) {
    batch.push_back(Request(spec, lengths[i], 10.f * static_cast<float>(i + 1),
                            [&answers](Result<InferResponse> r) { answers.push_back(std::move(r)); }));
    batch.back()->length = lengths[i];
  }
  PaddingInstance instance;
  ExecuteBatch(instance, spec, batch, stats.get(), clock);
  ASSERT_EQ(instance.seen.size(), 2u);
  EXPECT_EQ(instance.seen[0].shape, (Shape{3, 8}));  // padded to the bucket
  std::vector<float> x0 = ToFloats(instance.seen[0]), m0 = ToFloats(instance.seen[1]);
  EXPECT_EQ(std::vector<float>(x0.begin(), x0.begin() + 8), (std::vector<float>{10, 11, -1, -1, -1, -1, -1, -1}));
  EXPECT_EQ(std::vector<float>(m0.begin(), m0.begin() + 8), (std::vector<float>{1, 1, 0, 0, 0, 0, 0, 0}));
  ASSERT_EQ(answers.size(), 3u);
  for (size_t i = 0; i < answers.size(); ++i) {
    ASSERT_TRUE(answers[i].ok()) << answers[i].status().message();
    const InferResponse& r = *answers[i];
    ASSERT_EQ(r.outputs.size(), 2u);
    EXPECT_EQ(r.outputs[0].shape, (Shape{1, lengths[i], 2}));  // cut back to its own length
    std::vector<float> want_y;
    float want_s = 0;
    for (int64_t k = 0; k < lengths[i]; ++k) {
      const float x = 10.f * static_cast<float>(i + 1) + static_cast<float>(k);
      want_y.push_back(2 * x);
      want_y.push_back(1);
      want_s += x;
    }
    EXPECT_EQ(ToFloats(r.outputs[0]), want_y);
    EXPECT_EQ(r.outputs[1].shape, (Shape{1, 1}));  // not a sequence output: left alone
    EXPECT_EQ(ToFloats(r.outputs[1]), (std::vector<float>{want_s}));
  }
  const BatchingStats* b = stats->batching();
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->real_elements.load(), 8u);     // 2 + 5 + 1
  EXPECT_EQ(b->padded_elements.load(), 24u);  // 3 x 8
}

}  // namespace
}  // namespace inferd
