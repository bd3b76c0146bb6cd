// Cancellation: a flag a front end raises when its client gives up on a
// request (cancelled the call, its deadline passed, the connection closed).
// The scheduler checks it before running the request, so abandoned requests
// cost no model time; a request already running is not interrupted.
//
// Ownership: shared (std::shared_ptr) by the front end that raises it and the
// requests it covers; one flag may cover many requests (a whole stream).
// Thread-safety: Cancel and cancelled may be called from any thread.
#pragma once

#include <atomic>

namespace inferd {

class Cancellation {
 public:
  void Cancel() { cancelled_.store(true, std::memory_order_release); }
  bool cancelled() const { return cancelled_.load(std::memory_order_acquire); }

 private:
  std::atomic<bool> cancelled_{false};
};

}  // namespace inferd
