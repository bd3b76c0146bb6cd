// DynamicBatcher: the Scheduler for one model version. It owns the model's
// instances and one worker thread per instance; each idle worker asks the
// BatchQueue for the next batch and executes it, so model code never runs on
// the caller's (network) threads and batches only form when an instance is
// free to run them.
//
// Time comes from the injected Clock: with a FakeClock, a test advances time
// to expire max_queue_delay or queue timeouts without sleeping.
//
// Thread-safety: thread-safe. Shutdown drains: queued requests are sent at
// once (no waiting for the delay), in-flight ones finish, workers join.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "backends/backend.h"
#include "core/clock.h"
#include "core/model_spec.h"
#include "core/mutex.h"
#include "metrics/model_stats.h"
#include "scheduler/batch_queue.h"
#include "scheduler/scheduler.h"

namespace inferd {

class DynamicBatcher final : public Scheduler {
 public:
  struct Options {
    BatchPolicy policy;
    Clock* clock = nullptr;             // not owned; outlives the batcher
    CpuLoad* cpu_load = nullptr;        // not owned; outlives the batcher; may be null
    std::shared_ptr<ModelStats> stats;  // may be null
    // Runs once on every instance's worker thread, after OnWorkerThreadStart
    // and before the worker takes requests (model_warmup). May be empty.
    std::function<Status(ModelInstance&)> warmup;
    // The workers run as SCHED_BATCH (core/thread_policy.h): a worker woken by the I/O thread does not preempt it.
    bool batch_scheduling = true;
  };

  // `spec` must outlive the batcher. Starts one worker per instance.
  DynamicBatcher(Options options, const ModelSpec& spec, std::vector<std::unique_ptr<ModelInstance>> instances);
  ~DynamicBatcher() override;

  DynamicBatcher(const DynamicBatcher&) = delete;
  DynamicBatcher& operator=(const DynamicBatcher&) = delete;

  Status Enqueue(std::unique_ptr<PendingRequest>& pending) override;
  size_t QueueSize() const override;
  Status Admission() const override;
  void Shutdown() override;

  // Blocks until every worker has run Options::warmup; the first failure,
  // prefixed with the instance index, or OK.
  Status WaitReady() override;

 private:
  void WorkerLoop(ModelInstance* instance, size_t index);
  // Copies adaptive batching's estimates into the model's BatchingStats.
  void PublishEstimates() TSA_REQUIRES(mu_);

  Options options_;
  const ModelSpec& spec_;
  std::vector<std::unique_ptr<ModelInstance>> instances_;

  mutable Mutex mu_;
  CondVar cv_;
  CondVar warmup_cv_;
  BatchQueue queue_ TSA_GUARDED_BY(mu_);
  bool stopping_ TSA_GUARDED_BY(mu_) = false;
  size_t warmed_up_ TSA_GUARDED_BY(mu_) = 0;  // workers done with warmup
  Status warmup_status_ TSA_GUARDED_BY(mu_);
  BatchingStats* batching_stats_ = nullptr;  // owned by options_.stats; null when unused
  std::vector<std::thread> workers_;
  // queue_.Rejecting() as of the last Push or decision (read without mu_).
  std::atomic<bool> rejecting_{false};
};

}  // namespace inferd
