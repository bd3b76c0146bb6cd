// AdminExecutor: one thread for management calls that block -- model loads
// and unloads, label changes, rollback -- shared by every front end, so no
// protocol library's I/O or callback thread ever waits for a model load
// (inference keeps flowing while a model loads). Jobs run one at a time, in
// the order they were posted.
//
// Thread-safety: thread-safe. A job posted after Stop (or still queued at
// Stop) runs at once on the calling thread with cancelled = true and must
// answer its caller without doing the work.
#pragma once

#include <deque>
#include <functional>
#include <thread>

#include "core/mutex.h"

namespace inferd {

class AdminExecutor {
 public:
  using Job = std::function<void(bool cancelled)>;

  AdminExecutor();
  ~AdminExecutor();  // Stop()
  AdminExecutor(const AdminExecutor&) = delete;
  AdminExecutor& operator=(const AdminExecutor&) = delete;

  void Post(Job job);
  // Lets the running job finish, cancels the queued ones, joins. Idempotent.
  void Stop();

 private:
  void Run();

  Mutex mu_;
  CondVar cv_;
  std::deque<Job> jobs_ TSA_GUARDED_BY(mu_);
  bool stop_ TSA_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace inferd
