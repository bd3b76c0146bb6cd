// FakeClock: a Clock whose time moves only when a test calls Advance().
// Waiters blocked in WaitUntil wake when time passes their deadline (or when
// their condition variable is notified as usual). No sleeps anywhere.
//
// Thread-safety: thread-safe. The condition variables and mutexes of waiters
// must outlive any concurrent Advance() call (true for objects that outlive
// the clock's use in a test).
#pragma once

#include <algorithm>
#include <vector>

#include "core/clock.h"

namespace inferd::testing {

class FakeClock final : public Clock {
 public:
  explicit FakeClock(TimePoint start = TimePoint(std::chrono::seconds(1000))) : now_(start) {}

  TimePoint Now() const override {
    std::lock_guard<std::mutex> g(mu_);
    return now_;
  }

  void WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock, TimePoint deadline) override {
    Waiter w{lock.mutex(), &cv};
    {
      std::lock_guard<std::mutex> g(mu_);
      if (now_ >= deadline) return;
      waiters_.push_back(w);
      ++wait_calls_;
    }
    waiters_changed_.notify_all();
    cv.wait(lock);
    std::lock_guard<std::mutex> g(mu_);
    auto it = std::find(waiters_.begin(), waiters_.end(), w);
    if (it != waiters_.end()) waiters_.erase(it);
  }

  void Advance(Duration d) {
    std::vector<Waiter> copy;
    {
      std::lock_guard<std::mutex> g(mu_);
      now_ += d;
      copy = waiters_;
    }
    for (const Waiter& w : copy) {
      { std::lock_guard<std::mutex> g(*w.mu); }  // the waiter is inside cv.wait now
      w.cv->notify_all();
    }
  }

  // Blocks until WaitUntil has been entered (and blocked) at least `n` times in
  // total. Lets a test know a worker reached its timed wait.
  void AwaitWaitCalls(int n) {
    std::unique_lock<std::mutex> g(mu_);
    waiters_changed_.wait(g, [&] { return wait_calls_ >= n; });
  }

 private:
  struct Waiter {
    std::mutex* mu;
    std::condition_variable* cv;
    bool operator==(const Waiter& o) const { return mu == o.mu && cv == o.cv; }
  };
  mutable std::mutex mu_;
  std::condition_variable waiters_changed_;
  TimePoint now_;
  std::vector<Waiter> waiters_;
  int wait_calls_ = 0;
};

}  // namespace inferd::testing
