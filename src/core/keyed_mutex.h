// KeyedMutex: one mutual-exclusion lock per key (a model name), created on
// demand, so work on different keys runs in parallel while work on one key is
// serialized. Locks are RAII handles; TryAcquire never blocks. A function
// that must run under one key's lock takes `const KeyedMutex::Lock&` (the
// proof that the caller acquired it) and asserts Holds().
//
// Thread-safety: thread-safe. A handle must not outlive its KeyedMutex.
#pragma once

#include <functional>
#include <set>
#include <string>
#include <utility>

#include "core/mutex.h"

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
    // The key it holds ("" when it owns nothing).
    const std::string& key() const { return key_; }
    // Whether it is `owner`'s lock of `key`: functions that need a key's lock
    // take the Lock itself as proof (clang's analysis cannot name one key of
    // many) and check this.
    bool Holds(const KeyedMutex& owner, const std::string& key) const { return owner_ == &owner && key_ == key; }

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
    MutexLock g(&mu_);
    while (held_.count(key)) cv_.Wait(&mu_);
    held_.insert(key);
    return Lock(this, key);
  }

  // A lock that owns() nothing when `key` is held elsewhere.
  Lock TryAcquire(const std::string& key) {
    MutexLock g(&mu_);
    if (!held_.insert(key).second) return Lock();
    return Lock(this, key);
  }

  // Blocks until no key is held.
  void AwaitIdle() {
    MutexLock g(&mu_);
    while (!held_.empty()) cv_.Wait(&mu_);
  }

 private:
  void Unlock(const std::string& key) {
    {
      MutexLock g(&mu_);
      held_.erase(key);
    }
    cv_.NotifyAll();
  }

  Mutex mu_;
  CondVar cv_;
  std::set<std::string, std::less<>> held_ TSA_GUARDED_BY(mu_);
};

}  // namespace inferd
