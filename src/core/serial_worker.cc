#include "core/serial_worker.h"

namespace inferd {

SerialWorker::~SerialWorker() {
  {
    MutexLock l(&mu_);
    stopping_ = true;
    jobs_.clear();
  }
  cv_.NotifyAll();
  if (thread_.joinable()) thread_.join();
}

void SerialWorker::Post(std::function<void()> job) {
  {
    MutexLock l(&mu_);
    if (stopping_) return;
    jobs_.push_back(std::move(job));
    if (!started_) {
      started_ = true;
      thread_ = std::thread([this] { Run(); });
    }
  }
  cv_.NotifyOne();
}

void SerialWorker::Run() {
  MutexLock l(&mu_);
  for (;;) {
    while (!stopping_ && jobs_.empty()) cv_.Wait(&mu_);
    if (stopping_) return;
    std::function<void()> job = std::move(jobs_.front());
    jobs_.pop_front();
    l.Unlock();
    job();
    job = nullptr;  // what it holds goes before the next job, off the lock
    l.Lock();
  }
}

}  // namespace inferd
