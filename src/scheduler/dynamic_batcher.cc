#include "scheduler/dynamic_batcher.h"

#include "core/thread_policy.h"
#include "scheduler/batch_executor.h"

namespace inferd {

DynamicBatcher::DynamicBatcher(Options options, const ModelSpec& spec,
                               std::vector<std::unique_ptr<ModelInstance>> instances)
    : options_(std::move(options)),
      spec_(spec),
      instances_(std::move(instances)),
      queue_(options_.policy, options_.cpu_load) {
  if (options_.stats && (queue_.adaptive() || options_.policy.padding)) {
    batching_stats_ = options_.stats->EnableBatching();
    batching_stats_->adaptive.store(queue_.adaptive() != nullptr);
    batching_stats_->padding.store(options_.policy.padding.has_value());
  }
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

void DynamicBatcher::PublishEstimates() {
  const AdaptiveBatching* a = queue_.adaptive();
  if (!batching_stats_ || !a) return;
  const AdaptiveBatching::Estimates e = a->estimates(options_.clock->Now());
  BatchingStats& s = *batching_stats_;
  s.arrival_rows_per_s.store(e.arrival_rows_per_s, std::memory_order_relaxed);
  s.cost_fixed_us.store(e.fixed_s * 1e6, std::memory_order_relaxed);
  s.cost_per_row_us.store(e.per_row_s * 1e6, std::memory_order_relaxed);
  s.cost_per_position_us.store(e.per_position_s * 1e6, std::memory_order_relaxed);
  s.cost_fitted.store(e.fitted, std::memory_order_relaxed);
  s.cost_samples.store(e.samples, std::memory_order_relaxed);
  s.waits.store(e.waits, std::memory_order_relaxed);
  s.wait_us_total.store(static_cast<uint64_t>(e.wait_s_total * 1e6), std::memory_order_relaxed);
  s.cpu_utilization.store(e.cpu_utilization, std::memory_order_relaxed);
}

void DynamicBatcher::WorkerLoop(ModelInstance* instance, size_t index) {
  if (options_.batch_scheduling) (void)UseBatchScheduling();  // best effort: a policy, not a need
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
      int64_t rows = 0;
      for (const auto& p : d.batch) rows += p->rows;
      const TimePoint started = clock.Now();
      ExecuteBatch(*instance, spec_, d.batch, options_.stats.get(), clock, static_cast<int>(index));
      const Duration took = clock.Now() - started;
      // The requests (their tensors, callbacks and trace buffers) go before the lock is taken again: their
      // release is work that a request arriving meanwhile must not wait for.
      const int64_t padded_length = d.padded_length;
      d = BatchQueue::Decision();
      lock.Lock();
      if (rows > 0) {
        queue_.RecordExecution(rows, padded_length, took);
        PublishEstimates();
      }
      continue;
    }
    if (stopping_ && queue_.empty()) return;
    if (d.wake_at && queue_.adaptive()) PublishEstimates();
    if (d.wake_at)
      cv_.WaitUntil(&mu_, &clock, *d.wake_at);
    else
      cv_.Wait(&mu_);
  }
}

}  // namespace inferd
