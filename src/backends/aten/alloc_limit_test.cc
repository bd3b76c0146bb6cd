#include "backends/aten/alloc_limit.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>
#include <thread>

namespace inferd::aten {
namespace {

TEST(AllocationLimit, AScopeRejectsLargerTensorsBeforeAllocatingAndEndsWithIt) {
  InstallAllocationLimit();
  InstallAllocationLimit();  // idempotent
  EXPECT_EQ(CurrentAllocationLimit(), 0);
  {
    AllocationLimitScope scope(1 << 20);
    EXPECT_EQ(CurrentAllocationLimit(), 1 << 20);
    EXPECT_EQ(at::zeros({256, 1024}, at::kFloat).nbytes(), 1u << 20);  // exactly the cap
    try {
      (void)at::zeros({1 << 20, 1 << 20}, at::kFloat);  // 4 TiB
      FAIL() << "no error";
    } catch (const c10::Error& e) {
      const std::string what = e.what_without_backtrace();
      EXPECT_NE(what.find("a tensor of 4.0 TiB exceeds the model's limit of 1.0 MiB per tensor"), std::string::npos)
          << what;
    }
    EXPECT_THROW((void)at::empty({257, 1024}, at::kFloat), c10::Error);
    {
      AllocationLimitScope inner(0);  // no cap
      EXPECT_EQ(CurrentAllocationLimit(), 0);
      EXPECT_EQ(at::empty({300, 1024}, at::kFloat).numel(), 300 * 1024);
    }
    EXPECT_EQ(CurrentAllocationLimit(), 1 << 20);
    // Another thread has its own (no) cap.
    int64_t seen = -1, numel = 0;
    std::thread([&] {
      seen = CurrentAllocationLimit();
      numel = at::empty({300, 1024}, at::kFloat).numel();
    }).join();
    EXPECT_EQ(seen, 0);
    EXPECT_EQ(numel, 300 * 1024);
  }
  EXPECT_EQ(CurrentAllocationLimit(), 0);
  EXPECT_EQ(at::empty({300, 1024}, at::kFloat).numel(), 300 * 1024);
}

}  // namespace
}  // namespace inferd::aten
