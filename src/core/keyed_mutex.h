// KeyedMutex: one mutual-exclusion lock per key (a model name), created on
// demand, so work on different keys runs in parallel while work on one key is
// serialized. Locks are RAII handles; TryAcquire never blocks.
//
// Thread-safety: thread-safe. A handle must not outlive its KeyedMutex.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <utility>

namespace inferd {

class KeyedMutex {
 public:
  class [[nodiscard]] Lock {
   public:
    Lock() = default;
    Lock(Lock&& o) noexcept : owner_(std::exchange(o.owner_, nullptr)), key_(std::move(o.key_)) {}
    Lock& operator=(Lock&& o) noexcept {
      if (this != &o) {
        Release();
        owner_ = std::exchange(o.owner_, nullptr);
        key_ = std::move(o.key_);
      }
      return *this;
    }
    ~Lock() { Release(); }
    bool owns() const { return owner_ != nullptr; }

   private:
    friend class KeyedMutex;
    Lock(KeyedMutex* owner, std::string key) : owner_(owner), key_(std::move(key)) {}
    void Release() {
      if (owner_) std::exchange(owner_, nullptr)->Unlock(key_);
    }
    KeyedMutex* owner_ = nullptr;
    std::string key_;
  };

  Lock Acquire(const std::string& key) {
    std::unique_lock<std::mutex> g(mu_);
    cv_.wait(g, [&] { return !held_.count(key); });
    held_.insert(key);
    return Lock(this, key);
  }

  // A lock that owns() nothing when `key` is held elsewhere.
  Lock TryAcquire(const std::string& key) {
    std::lock_guard<std::mutex> g(mu_);
    if (!held_.insert(key).second) return Lock();
    return Lock(this, key);
  }

  // Blocks until no key is held.
  void AwaitIdle() {
    std::unique_lock<std::mutex> g(mu_);
    cv_.wait(g, [&] { return held_.empty(); });
  }

 private:
  void Unlock(const std::string& key) {
    {
      std::lock_guard<std::mutex> g(mu_);
      held_.erase(key);
    }
    cv_.notify_all();
  }

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::set<std::string, std::less<>> held_;
};

}  // namespace inferd
