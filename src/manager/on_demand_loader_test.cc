#include "manager/on_demand_loader.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>

#include "testing/fake_clock.h"

namespace inferd {
namespace {

using std::chrono::seconds;

// A load function the test releases by hand, and a record of answers.
struct Harness {
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::string, int> loads_started;
  bool release = false;
  Status load_status;
  std::vector<std::pair<std::string, StatusCode>> answers;  // request id, code

  OnDemandLoader::LoadFn Load() {
    return [this](const std::string& model) {
      std::unique_lock<std::mutex> g(mu);
      ++loads_started[model];
      cv.notify_all();
      cv.wait(g, [&] { return release; });
      return load_status;
    };
  }
  OnDemandLoader::DoneFn Done() {
    return [this](OnDemandLoader::Waiter w, const Status& st) {
      std::lock_guard<std::mutex> g(mu);
      answers.emplace_back(w.request->id, st.code());
      cv.notify_all();
    };
  }
  void AwaitLoadStarted(const std::string& model) {
    std::unique_lock<std::mutex> g(mu);
    cv.wait(g, [&] { return loads_started[model] > 0; });
  }
  void AwaitAnswers(size_t n) {
    std::unique_lock<std::mutex> g(mu);
    cv.wait(g, [&] { return answers.size() >= n; });
  }
  void Release(Status st) {
    std::lock_guard<std::mutex> g(mu);
    load_status = std::move(st);
    release = true;
    cv.notify_all();
  }
};

OnDemandLoader::Waiter MakeWaiter(const std::string& model, const std::string& id, TimePoint deadline) {
  OnDemandLoader::Waiter w;
  w.request = std::make_unique<InferRequest>();
  w.request->model_name = model;
  w.request->id = id;
  w.deadline = deadline;
  return w;
}

TEST(OnDemandLoader, ConcurrentRequestsShareOneLoad) {
  testing::FakeClock clock;
  Harness h;
  OnDemandLoader loader(2, &clock, h.Load(), h.Done());
  loader.Enqueue("m", MakeWaiter("m", "a", clock.Now() + seconds(30)));
  h.AwaitLoadStarted("m");
  loader.Enqueue("m", MakeWaiter("m", "b", clock.Now() + seconds(30)));
  EXPECT_TRUE(loader.IsPending("m"));
  h.Release(Status::OK());
  h.AwaitAnswers(2);
  loader.Stop();
  EXPECT_EQ(h.loads_started["m"], 1);
  for (const auto& [id, code] : h.answers) EXPECT_EQ(code, StatusCode::kOk) << id;
  EXPECT_FALSE(loader.IsPending("m"));
}

// While a finished load's waiters are answered (their requests are on their
// way to the model's queue), the model is in use: eviction must skip it.
TEST(OnDemandLoader, AModelIsInUseWhileItsWaitersAreAnswered) {
  testing::FakeClock clock;
  Harness h;
  OnDemandLoader* self = nullptr;
  std::vector<bool> in_use_when_answered;
  auto done = h.Done();
  OnDemandLoader loader(1, &clock, h.Load(), [&](OnDemandLoader::Waiter w, const Status& st) {
    in_use_when_answered.push_back(self->IsInUse("m"));
    done(std::move(w), st);
  });
  self = &loader;
  EXPECT_FALSE(loader.IsInUse("m"));
  loader.Enqueue("m", MakeWaiter("m", "a", clock.Now() + seconds(30)));
  h.AwaitLoadStarted("m");
  EXPECT_TRUE(loader.IsInUse("m"));
  h.Release(Status::OK());
  h.AwaitAnswers(1);
  loader.Stop();
  EXPECT_EQ(in_use_when_answered, (std::vector<bool>{true}));
  EXPECT_FALSE(loader.IsInUse("m"));
  EXPECT_FALSE(loader.IsPending("m"));
}

TEST(OnDemandLoader, LoadErrorReachesEveryWaiter) {
  testing::FakeClock clock;
  Harness h;
  OnDemandLoader loader(1, &clock, h.Load(), h.Done());
  loader.Enqueue("m", MakeWaiter("m", "a", clock.Now() + seconds(30)));
  loader.Enqueue("m", MakeWaiter("m", "b", clock.Now() + seconds(30)));
  h.AwaitLoadStarted("m");
  h.Release(Status::Unavailable("broken"));
  h.AwaitAnswers(2);
  loader.Stop();
  for (const auto& [id, code] : h.answers) EXPECT_EQ(code, StatusCode::kUnavailable) << id;
}

TEST(OnDemandLoader, WaiterPastItsDeadlineIsAnsweredWhileTheLoadRuns) {
  testing::FakeClock clock;
  Harness h;
  OnDemandLoader loader(1, &clock, h.Load(), h.Done());
  loader.Enqueue("m", MakeWaiter("m", "short", clock.Now() + seconds(1)));
  loader.Enqueue("m", MakeWaiter("m", "long", clock.Now() + seconds(60)));
  h.AwaitLoadStarted("m");
  clock.AwaitWaitCalls(1);
  clock.Advance(seconds(2));
  h.AwaitAnswers(1);
  {
    std::lock_guard<std::mutex> g(h.mu);
    ASSERT_EQ(h.answers.size(), 1u);  // the load is still running
    EXPECT_EQ(h.answers[0], std::make_pair(std::string("short"), StatusCode::kDeadlineExceeded));
  }
  h.Release(Status::OK());
  h.AwaitAnswers(2);
  loader.Stop();
  EXPECT_EQ(h.answers[1], std::make_pair(std::string("long"), StatusCode::kOk));
}

TEST(OnDemandLoader, StopAnswersQueuedWaitersUnavailable) {
  testing::FakeClock clock;
  Harness h;
  OnDemandLoader loader(1, &clock, h.Load(), h.Done());
  loader.Enqueue("busy", MakeWaiter("busy", "a", clock.Now() + seconds(30)));
  h.AwaitLoadStarted("busy");
  loader.Enqueue("queued", MakeWaiter("queued", "b", clock.Now() + seconds(30)));  // behind the running load
  loader.RequestStop();
  h.Release(Status::OK());  // the running load finishes; the queued one never starts
  loader.Stop();
  ASSERT_EQ(h.answers.size(), 2u);
  std::map<std::string, StatusCode> by_id(h.answers.begin(), h.answers.end());
  EXPECT_EQ(by_id["a"], StatusCode::kOk);
  EXPECT_EQ(by_id["b"], StatusCode::kUnavailable);
  EXPECT_EQ(h.loads_started.count("queued"), 0u);
  // After Stop, a new waiter is answered at once.
  loader.Enqueue("late", MakeWaiter("late", "c", clock.Now() + seconds(30)));
  EXPECT_EQ(h.answers.size(), 3u);
}

}  // namespace
}  // namespace inferd
