#include "scheduler/scheduler_factory.h"

#include <gtest/gtest.h>

#include <future>

#include "testing/fake_clock.h"
#include "testing/recording_instance.h"

namespace inferd {
namespace {

ModelSpec Spec() {
  ModelSpec spec;
  spec.name = "m";
  spec.max_batch_size = 4;
  spec.inputs.push_back({"x", DataType::kFp32, {2}});
  spec.outputs.push_back({"y", DataType::kFp32, {2}});
  return spec;
}

TEST(SchedulerFactory, BuildsTheDynamicBatcherByDefault) {
  testing::FakeClock clock;
  testing::RecordingInstance::Log log;
  const ModelSpec spec = Spec();
  EXPECT_EQ(SchedulerKind(spec), "dynamic");
  SchedulerContext c;
  c.spec = &spec;
  c.clock = &clock;
  c.instances.push_back(std::make_unique<testing::RecordingInstance>(&log));
  auto s = SchedulerFactory::WithBuiltins().Create(std::move(c));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_TRUE((*s)->WaitReady().ok());

  std::promise<Result<InferResponse>> done;
  auto p = std::make_unique<PendingRequest>();
  p->request = std::make_unique<InferRequest>();
  p->request->inputs.push_back(testing::F32("x", {1, 2}, {1, 2}));
  p->callback = [&](Result<InferResponse> r) { done.set_value(std::move(r)); };
  ASSERT_TRUE((*s)->Enqueue(p).ok());
  auto f = done.get_future();
  ASSERT_EQ(f.wait_for(std::chrono::seconds(20)), std::future_status::ready);
  auto r = f.get();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(testing::ToFloats(r->outputs[0]), (std::vector<float>{2, 4}));
  (*s)->Shutdown();
}

TEST(SchedulerFactory, AKindWithoutABuilderIsAClearError) {
  const ModelSpec spec = Spec();
  SchedulerContext c;
  c.spec = &spec;
  auto s = SchedulerFactory().Create(std::move(c));
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.status().message(), "model 'm' needs a 'dynamic' scheduler, which this server does not have");
}

}  // namespace
}  // namespace inferd
