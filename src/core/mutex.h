// Mutex, SharedMutex and CondVar: std::mutex / std::shared_mutex /
// std::condition_variable with clang thread-safety annotations, so that
// TSA_GUARDED_BY / TSA_REQUIRES in inferd's headers are checked by the compiler
// (`make test` builds with clang -Wthread-safety -Werror). Under GCC they
// are the standard types with no overhead.
//
// Conditions are waited for with explicit loops (`while (!ready_) cv_.Wait(mu_);`)
// rather than predicate lambdas: the analysis does not see into lambdas.
//
// Thread-safety: these are the synchronization primitives themselves.
#pragma once

#include <condition_variable>
#include <mutex>
#include <shared_mutex>

#include "core/clock.h"
#include "core/thread_annotations.h"

namespace inferd {

class TSA_CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() TSA_ACQUIRE() { mu_.lock(); }
  void Unlock() TSA_RELEASE() { mu_.unlock(); }
  bool TryLock() TSA_TRY_ACQUIRE(true) { return mu_.try_lock(); }
  // Tells the analysis the caller holds this mutex (no run-time check).
  void AssertHeld() const TSA_ASSERT_CAPABILITY(this) {}

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds a Mutex for its scope. Unlock() and Lock() let go of it and take it
// again inside the scope (e.g. around a callback), as std::unique_lock does.
class TSA_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) TSA_ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() TSA_RELEASE() {
    if (locked_) mu_->Unlock();
  }
  void Unlock() TSA_RELEASE() {
    mu_->Unlock();
    locked_ = false;
  }
  void Lock() TSA_ACQUIRE() {
    mu_->Lock();
    locked_ = true;
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
  bool locked_ = true;
};

// A mutex the owning thread may lock again (for callbacks that may run
// inline, inside a call made under the lock).
class TSA_CAPABILITY("mutex") RecursiveMutex {
 public:
  RecursiveMutex() = default;
  RecursiveMutex(const RecursiveMutex&) = delete;
  RecursiveMutex& operator=(const RecursiveMutex&) = delete;

  void Lock() TSA_ACQUIRE() { mu_.lock(); }
  void Unlock() TSA_RELEASE() { mu_.unlock(); }

 private:
  std::recursive_mutex mu_;
};

class TSA_SCOPED_CAPABILITY RecursiveMutexLock {
 public:
  explicit RecursiveMutexLock(RecursiveMutex* mu) TSA_ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~RecursiveMutexLock() TSA_RELEASE() { mu_->Unlock(); }
  RecursiveMutexLock(const RecursiveMutexLock&) = delete;
  RecursiveMutexLock& operator=(const RecursiveMutexLock&) = delete;

 private:
  RecursiveMutex* const mu_;
};

class TSA_CAPABILITY("shared mutex") SharedMutex {
 public:
  SharedMutex() = default;
  SharedMutex(const SharedMutex&) = delete;
  SharedMutex& operator=(const SharedMutex&) = delete;

  void Lock() TSA_ACQUIRE() { mu_.lock(); }
  void Unlock() TSA_RELEASE() { mu_.unlock(); }
  void LockShared() TSA_ACQUIRE_SHARED() { mu_.lock_shared(); }
  void UnlockShared() TSA_RELEASE_SHARED() { mu_.unlock_shared(); }
  void AssertHeld() const TSA_ASSERT_CAPABILITY(this) {}

 private:
  std::shared_mutex mu_;
};

class TSA_SCOPED_CAPABILITY WriterLock {
 public:
  explicit WriterLock(SharedMutex* mu) TSA_ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~WriterLock() TSA_RELEASE() { mu_->Unlock(); }
  WriterLock(const WriterLock&) = delete;
  WriterLock& operator=(const WriterLock&) = delete;

 private:
  SharedMutex* const mu_;
};

class TSA_SCOPED_CAPABILITY ReaderLock {
 public:
  explicit ReaderLock(SharedMutex* mu) TSA_ACQUIRE_SHARED(mu) : mu_(mu) { mu_->LockShared(); }
  ~ReaderLock() TSA_RELEASE() { mu_->UnlockShared(); }
  ReaderLock(const ReaderLock&) = delete;
  ReaderLock& operator=(const ReaderLock&) = delete;

 private:
  SharedMutex* const mu_;
};

class CondVar {
 public:
  // Blocks until notified (spurious wake-ups allowed: callers loop on their condition).
  void Wait(Mutex* mu) TSA_REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();
  }
  // Blocks until notified or until `clock` reads `deadline` (FakeClock in tests).
  void WaitUntil(Mutex* mu, Clock* clock, TimePoint deadline) TSA_REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    clock->WaitUntil(cv_, lock, deadline);
    lock.release();
  }
  // Blocks until notified or until `timeout` of real time passed; false on
  // timeout. For bounded waits in tests and shutdown paths only: logic that
  // depends on time uses WaitUntil with the injected Clock.
  template <typename Rep, typename Period>
  bool WaitForReal(Mutex* mu, std::chrono::duration<Rep, Period> timeout) TSA_REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    const bool notified = cv_.wait_for(lock, timeout) == std::cv_status::no_timeout;
    lock.release();
    return notified;
  }
  void NotifyOne() { cv_.notify_one(); }
  void NotifyAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace inferd
