// SerialWorker: one background thread that runs posted jobs one at a time,
// in the order they were posted (work that must not hold up the thread that
// asks for it: a model's optimisation once it proves hot). The thread starts
// with the first job, so an unused worker costs no thread.
//
// Thread-safety: Post may be called from any thread, also from a job. The
// destructor drops the jobs not yet started, waits for the running one and
// joins the thread; it must not run on the worker's own thread (a job must
// not own its worker).
#pragma once

#include <deque>
#include <functional>
#include <thread>

#include "core/mutex.h"

namespace inferd {

class SerialWorker {
 public:
  SerialWorker() = default;
  ~SerialWorker();
  SerialWorker(const SerialWorker&) = delete;
  SerialWorker& operator=(const SerialWorker&) = delete;

  void Post(std::function<void()> job);

 private:
  void Run();

  Mutex mu_;
  CondVar cv_;
  std::deque<std::function<void()>> jobs_ TSA_GUARDED_BY(mu_);
  bool stopping_ TSA_GUARDED_BY(mu_) = false;
  bool started_ TSA_GUARDED_BY(mu_) = false;
  std::thread thread_;  // set once, under mu_, by the first Post
};

}  // namespace inferd
