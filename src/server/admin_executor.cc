#include "server/admin_executor.h"

namespace inferd {

AdminExecutor::AdminExecutor() : thread_([this] { Run(); }) {}

AdminExecutor::~AdminExecutor() { Stop(); }

void AdminExecutor::Post(Job job) {
  {
    MutexLock g(&mu_);
    if (!stop_) {
      jobs_.push_back(std::move(job));
      cv_.NotifyOne();
      return;
    }
  }
  job(true);
}

void AdminExecutor::Stop() {
  std::deque<Job> cancelled;
  {
    MutexLock g(&mu_);
    stop_ = true;
    cancelled.swap(jobs_);
  }
  cv_.NotifyAll();
  if (thread_.joinable()) thread_.join();
  for (auto& job : cancelled) job(true);
}

void AdminExecutor::Run() {
  MutexLock g(&mu_);
  for (;;) {
    while (!stop_ && jobs_.empty()) cv_.Wait(&mu_);
    if (jobs_.empty()) return;  // stopped
    Job job = std::move(jobs_.front());
    jobs_.pop_front();
    g.Unlock();
    job(false);
    job = nullptr;  // released outside the lock
    g.Lock();
  }
}

}  // namespace inferd
