// Clock: the time seam. The batcher and anything with deadlines read time and
// wait through a Clock so tests can drive time by hand (see FakeClock) and
// never sleep.
//
// Thread-safety: implementations are thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

namespace inferd {

using Duration = std::chrono::nanoseconds;
using TimePoint = std::chrono::time_point<std::chrono::steady_clock, Duration>;

class Clock {
 public:
  virtual ~Clock() = default;
  virtual TimePoint Now() const = 0;

  // Blocks on `cv` (with `lock` held, as std::condition_variable_any would)
  // until notified or until Now() >= deadline. Spurious wake-ups allowed:
  // callers re-check their condition.
  virtual void WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock, TimePoint deadline) = 0;
};

// The real monotonic clock.
class SteadyClock final : public Clock {
 public:
  TimePoint Now() const override { return std::chrono::steady_clock::now(); }
  void WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock, TimePoint deadline) override {
    cv.wait_until(lock, deadline);
  }
};

}  // namespace inferd
