#include "scheduler/dynamic_batcher.h"

#include "scheduler/batch_executor.h"

namespace inferd {

DynamicBatcher::DynamicBatcher(Options options, const ModelSpec& spec,
                               std::vector<std::unique_ptr<ModelInstance>> instances)
    : options_(std::move(options)), spec_(spec), instances_(std::move(instances)), queue_(options_.policy) {
  workers_.reserve(instances_.size());
  for (size_t i = 0; i < instances_.size(); ++i)
    workers_.emplace_back([this, p = instances_[i].get(), i] { WorkerLoop(p, i); });
}

DynamicBatcher::~DynamicBatcher() { Shutdown(); }

Status DynamicBatcher::Enqueue(std::unique_ptr<PendingRequest>& pending) {
  {
    MutexLock g(&mu_);
    if (stopping_) return Status::Unavailable("model '" + spec_.name + "' is shutting down");
    Status st = queue_.Push(pending, options_.clock->Now());
    rejecting_.store(queue_.Rejecting(), std::memory_order_relaxed);
    if (!st.ok()) return st;
  }
  if (options_.stats) options_.stats->AddPending(1);
  cv_.NotifyOne();
  return Status::OK();
}

Status DynamicBatcher::Admission() const {
  if (!rejecting_.load(std::memory_order_relaxed)) return Status::OK();
  return Status::Unavailable("model '" + spec_.name + "' queue is full (max_queue_size " +
                             std::to_string(options_.policy.max_queue_size) + ")");
}

size_t DynamicBatcher::QueueSize() const {
  MutexLock g(&mu_);
  return queue_.size();
}

void DynamicBatcher::Shutdown() {
  {
    MutexLock g(&mu_);
    stopping_ = true;
  }
  cv_.NotifyAll();
  for (auto& t : workers_)
    if (t.joinable()) t.join();
}

Status DynamicBatcher::WaitReady() {
  MutexLock lock(&mu_);
  while (warmed_up_ < instances_.size()) warmup_cv_.Wait(&mu_);
  return warmup_status_;
}

void DynamicBatcher::WorkerLoop(ModelInstance* instance, size_t index) {
  instance->OnWorkerThreadStart();
  Status warm = options_.warmup ? options_.warmup(*instance) : Status::OK();
  Clock& clock = *options_.clock;
  MutexLock lock(&mu_);
  if (!warm.ok() && warmup_status_.ok()) warmup_status_ = warm.WithPrefix("instance " + std::to_string(index));
  ++warmed_up_;
  warmup_cv_.NotifyAll();
  for (;;) {
    BatchQueue::Decision d = queue_.Next(clock.Now(), stopping_);
    rejecting_.store(queue_.Rejecting(), std::memory_order_relaxed);
    if (!d.batch.empty() || !d.expired.empty() || !d.cancelled.empty()) {
      const bool more = !queue_.empty();
      lock.Unlock();
      if (more) cv_.NotifyOne();  // another idle instance may take the rest
      for (auto& p : d.expired) {
        FailRequest(*p, Status::Unavailable("request timed out in the queue of model '" + spec_.name + "'"),
                    FailureReason::kTimeout, options_.stats.get(), clock);
      }
      for (auto& p : d.cancelled) {
        FailRequest(*p, Status::Cancelled("request cancelled by the client before it ran (model '" + spec_.name + "')"),
                    FailureReason::kCancelled, options_.stats.get(), clock);
      }
      ExecuteBatch(*instance, spec_, d.batch, options_.stats.get(), clock);
      lock.Lock();
      continue;
    }
    if (stopping_ && queue_.empty()) return;
    if (d.wake_at)
      cv_.WaitUntil(&mu_, &clock, *d.wake_at);
    else
      cv_.Wait(&mu_);
  }
}

}  // namespace inferd
