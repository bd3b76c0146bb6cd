#include "core/serial_worker.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <future>
#include <iterator>
#include <thread>
#include <vector>

namespace inferd {
namespace {

TEST(SerialWorker, RunsJobsOneAtATimeInTheOrderPosted) {
  SerialWorker w;
  std::vector<int> order;  // touched by the worker's thread only, read after the last job
  std::promise<void> last;
  for (int i = 0; i < 5; ++i) w.Post([&order, i] { order.push_back(i); });
  // A job may post another: it runs after those already queued.
  w.Post([&] { w.Post([&] { last.set_value(); }); });
  ASSERT_EQ(last.get_future().wait_for(std::chrono::seconds(30)), std::future_status::ready);
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
}

TEST(SerialWorker, TheDestructorWaitsForTheRunningJob) {
  std::promise<void> running, release;
  std::shared_future<void> released = release.get_future().share();
  bool finished = false;
  std::thread releaser;
  {
    SerialWorker w;
    w.Post([&running, released, &finished] {
      running.set_value();
      released.wait();
      finished = true;
    });
    w.Post([] {});  // queued behind it: run or dropped, never waited for
    ASSERT_EQ(running.get_future().wait_for(std::chrono::seconds(30)), std::future_status::ready);
    releaser = std::thread([&release] { release.set_value(); });
  }
  releaser.join();
  EXPECT_TRUE(finished);
}

size_t ThreadsOfThisProcess() {
  return static_cast<size_t>(
      std::distance(std::filesystem::directory_iterator("/proc/self/task"), std::filesystem::directory_iterator()));
}

TEST(SerialWorker, ItsThreadStartsWithTheFirstJob) {
  // A sanitizer's runtime starts a thread of its own with the process's first thread: have that happen first.
  std::thread([] {}).join();
  const size_t before = ThreadsOfThisProcess();
  SerialWorker w;
  EXPECT_EQ(ThreadsOfThisProcess(), before);  // an unused worker costs no thread
  std::promise<void> ran;
  w.Post([&ran] { ran.set_value(); });
  ASSERT_EQ(ran.get_future().wait_for(std::chrono::seconds(30)), std::future_status::ready);
  EXPECT_EQ(ThreadsOfThisProcess(), before + 1);
}

}  // namespace
}  // namespace inferd
