#include "scheduler/dynamic_batcher.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <future>

#include "testing/fake_clock.h"
#include "testing/gated_backend.h"
#include "testing/recording_instance.h"

namespace inferd {
namespace {

using testing::F32;
using testing::FakeClock;
using testing::RecordingInstance;

ModelSpec Spec(int max_bs, bool dynamic, uint64_t delay_us) {
  ModelSpec s;
  s.name = "m";
  s.max_batch_size = max_bs;
  s.batching.dynamic = dynamic;
  s.batching.max_queue_delay_us = delay_us;
  s.inputs.push_back({"x", DataType::kFp32, {-1}});
  s.outputs.push_back({"y", DataType::kFp32, {-1}});
  return s;
}

struct Harness {
  explicit Harness(const ModelSpec& s, int instances = 1) : spec(s) {
    DynamicBatcher::Options o;
    o.policy = BatchPolicy::FromSpec(spec, /*default_max_queue_size=*/1000);  // > any test's burst
    o.clock = &clock;
    o.stats = stats;
    std::vector<std::unique_ptr<ModelInstance>> inst;
    for (int i = 0; i < instances; ++i) inst.push_back(std::make_unique<RecordingInstance>(&log));
    batcher = std::make_unique<DynamicBatcher>(std::move(o), spec, std::move(inst));
  }

  std::future<Result<InferResponse>> Send(int64_t rows, float value,
                                          std::shared_ptr<const Cancellation> cancellation = nullptr) {
    auto promise = std::make_shared<std::promise<Result<InferResponse>>>();
    auto fut = promise->get_future();
    auto p = std::make_unique<PendingRequest>();
    p->request = std::make_unique<InferRequest>();
    p->request->model_name = "m";
    p->request->inputs.push_back(F32("x", {rows, 3}, {value}));
    p->request->cancellation = std::move(cancellation);
    p->rows = rows;
    p->arrival = clock.Now();
    p->callback = [promise](Result<InferResponse> r) { promise->set_value(std::move(r)); };
    Status st = batcher->Enqueue(p);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return fut;
  }

  ModelSpec spec;
  FakeClock clock;
  RecordingInstance::Log log;
  std::shared_ptr<ModelStats> stats = std::make_shared<ModelStats>("m", "1", 8);
  std::unique_ptr<DynamicBatcher> batcher;
};

TEST(DynamicBatcher, BatchesConcurrentRequestsAfterTheDelayAndSplitsOutputs) {
  Harness h(Spec(8, true, 1000));
  auto a = h.Send(1, 1.f);
  auto b = h.Send(2, 5.f);
  h.clock.AwaitWaitCalls(1);  // the worker is waiting for the delay to expire
  EXPECT_EQ(a.wait_for(std::chrono::seconds(0)), std::future_status::timeout);
  h.clock.Advance(std::chrono::microseconds(1000));
  auto ra = a.get();
  auto rb = b.get();
  ASSERT_TRUE(ra.ok()) << ra.status().ToString();
  ASSERT_TRUE(rb.ok()) << rb.status().ToString();
  EXPECT_EQ(ra->outputs[0].shape, (Shape{1, 3}));
  EXPECT_EQ(testing::ToFloats(ra->outputs[0]), (std::vector<float>{2, 2, 2}));
  EXPECT_EQ(rb->outputs[0].shape, (Shape{2, 3}));
  EXPECT_EQ(testing::ToFloats(rb->outputs[0]), (std::vector<float>(6, 10.f)));
  std::lock_guard<std::mutex> g(h.log.mu);
  EXPECT_EQ(h.log.batch_rows, (std::vector<int64_t>{3}));
  EXPECT_EQ(h.stats->execution_count(), 1u);
  EXPECT_EQ(h.stats->inference_count(), 3u);
  EXPECT_EQ(h.stats->success_count(), 2u);
}

TEST(DynamicBatcher, ShutdownRunsQueuedRequestsWithoutWaitingForTheDelay) {
  Harness h(Spec(8, true, 1000000));
  auto a = h.Send(1, 3.f);
  h.batcher->Shutdown();
  auto r = a.get();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(testing::ToFloats(r->outputs[0])[0], 6.f);
  auto p = testing::Pending(1);
  EXPECT_EQ(h.batcher->Enqueue(p).code(), StatusCode::kUnavailable);
}

TEST(DynamicBatcher, QueueTimeoutFailsTheRequest) {
  ModelSpec s = Spec(8, true, 1000000);
  s.batching.queue.default_timeout_us = 50;
  Harness h(s);
  auto a = h.Send(1, 1.f);
  h.clock.AwaitWaitCalls(1);
  h.clock.Advance(std::chrono::microseconds(50));
  auto r = a.get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(h.stats->failure_count(FailureReason::kTimeout), 1u);
}

TEST(DynamicBatcher, ACancelledRequestIsAnsweredCancelledAndNeverRuns) {
  Harness h(Spec(8, true, 1000));
  auto flag = std::make_shared<Cancellation>();
  auto a = h.Send(1, 1.f, flag);
  auto b = h.Send(2, 5.f);
  h.clock.AwaitWaitCalls(1);  // both queued; the worker waits for the delay
  flag->Cancel();
  h.clock.Advance(std::chrono::microseconds(1000));
  auto ra = a.get();
  ASSERT_FALSE(ra.ok());
  EXPECT_EQ(ra.status().code(), StatusCode::kCancelled);
  EXPECT_NE(ra.status().message().find("cancelled by the client"), std::string::npos);
  ASSERT_TRUE(b.get().ok());
  std::lock_guard<std::mutex> g(h.log.mu);
  EXPECT_EQ(h.log.batch_rows, (std::vector<int64_t>{2}));  // only b ran
  EXPECT_EQ(h.stats->failure_count(FailureReason::kCancelled), 1u);
  EXPECT_EQ(h.stats->inference_count(), 2u);
}

TEST(DynamicBatcher, ManyConcurrentRequestsGetTheirOwnAnswers) {
  Harness h(Spec(8, true, 0), /*instances=*/2);
  std::vector<std::future<Result<InferResponse>>> futures;
  for (int i = 0; i < 200; ++i) futures.push_back(h.Send(1 + i % 3, static_cast<float>(i)));
  for (int i = 0; i < 200; ++i) {
    auto r = futures[static_cast<size_t>(i)].get();
    ASSERT_TRUE(r.ok());
    const auto v = testing::ToFloats(r->outputs[0]);
    ASSERT_EQ(v.size(), static_cast<size_t>(3 * (1 + i % 3)));
    for (float f : v) ASSERT_EQ(f, 2.f * static_cast<float>(i));
  }
}

}  // namespace
}  // namespace inferd

namespace inferd {
namespace {

// Admission() tells a front end, without locks, that the queue is full, so
// it can refuse a request before decoding its body.
TEST(DynamicBatcherAdmission, SaysFullOnceAPushFoundNoRoomUntilTheNextDecision) {
  testing::Gate gate;
  gate.Close();
  testing::FakeClock clock;
  ModelSpec spec;
  spec.name = "m";
  spec.max_batch_size = 0;
  spec.inputs.push_back({"x", DataType::kFp32, {-1}});
  spec.outputs.push_back({"y", DataType::kFp32, {-1}});
  testing::GatedBackend backend(&gate);
  auto model = backend.Load(spec, "/nonexistent");
  ASSERT_TRUE(model.ok());
  std::vector<std::unique_ptr<ModelInstance>> inst;
  inst.push_back(*(*model)->CreateInstance(0));
  DynamicBatcher::Options o;
  o.policy = BatchPolicy::FromSpec(spec, /*default_max_queue_size=*/1);
  o.clock = &clock;
  DynamicBatcher batcher(std::move(o), spec, std::move(inst));
  std::vector<std::future<Result<InferResponse>>> answers;
  auto send = [&] {
    auto promise = std::make_shared<std::promise<Result<InferResponse>>>();
    answers.push_back(promise->get_future());
    auto p = std::make_unique<PendingRequest>();
    p->request = std::make_unique<InferRequest>();
    p->request->model_name = "m";
    p->request->inputs.push_back(F32("x", {2}, {1, 2}));
    p->callback = [promise](Result<InferResponse> r) { promise->set_value(std::move(r)); };
    Status st = batcher.Enqueue(p);
    if (!st.ok()) promise->set_value(st);
    return st;
  };
  ASSERT_TRUE(send().ok());
  ASSERT_TRUE(gate.AwaitExecutionsStarted(1));  // the first runs (held); the queue is empty
  EXPECT_TRUE(batcher.Admission().ok());
  ASSERT_TRUE(send().ok());               // queued: the queue (max 1) is full now
  EXPECT_TRUE(batcher.Admission().ok());  // a Push has not yet looked for room
  const Status refused = send();
  EXPECT_EQ(refused.code(), StatusCode::kUnavailable);
  const Status hint = batcher.Admission();
  EXPECT_EQ(hint.code(), StatusCode::kUnavailable);
  EXPECT_EQ(hint.message(), refused.message());
  EXPECT_EQ(hint.message(), "model 'm' queue is full (max_queue_size 1)");
  gate.ReleaseExecutions(1);
  ASSERT_TRUE(gate.AwaitExecutionsStarted(2));  // a decision took the queued one: room again
  EXPECT_TRUE(batcher.Admission().ok());
  gate.Open();
  for (auto& a : answers) ASSERT_EQ(a.wait_for(std::chrono::seconds(20)), std::future_status::ready);
  batcher.Shutdown();
}

// Records the scheduling policy of the thread that runs it.
class PolicyProbe final : public ModelInstance {
 public:
  explicit PolicyProbe(std::promise<int>* seen) : seen_(seen) {}
  Result<std::vector<Tensor>> Execute(const std::vector<Tensor>& inputs) override {
    seen_->set_value(sched_getscheduler(0));
    return std::vector<Tensor>{inputs[0]};
  }

 private:
  std::promise<int>* seen_;
};

int WorkerPolicy(bool batch_scheduling) {
  ModelSpec spec = Spec(0, false, 0);
  FakeClock clock;
  std::promise<int> seen;
  DynamicBatcher::Options o;
  o.policy = BatchPolicy::FromSpec(spec, 10);
  o.clock = &clock;
  o.batch_scheduling = batch_scheduling;
  std::vector<std::unique_ptr<ModelInstance>> inst;
  inst.push_back(std::make_unique<PolicyProbe>(&seen));
  DynamicBatcher batcher(std::move(o), spec, std::move(inst));
  std::promise<Result<InferResponse>> answered;
  auto p = std::make_unique<PendingRequest>();
  p->request = std::make_unique<InferRequest>();
  p->request->model_name = "m";
  p->request->inputs.push_back(F32("x", {3}, {1.f}));
  p->arrival = clock.Now();
  p->callback = [&answered](Result<InferResponse> r) { answered.set_value(std::move(r)); };
  EXPECT_TRUE(batcher.Enqueue(p).ok());
  auto f = seen.get_future();
  EXPECT_EQ(f.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  EXPECT_EQ(answered.get_future().wait_for(std::chrono::seconds(30)), std::future_status::ready);
  batcher.Shutdown();
  return f.get();
}

TEST(DynamicBatcher, WorkersRunAsBatchThreadsUnlessToldNot) {
  EXPECT_EQ(WorkerPolicy(true), SCHED_BATCH);  // woken by an I/O thread, they do not preempt it
  EXPECT_EQ(WorkerPolicy(false), SCHED_OTHER);
}

}  // namespace
}  // namespace inferd
