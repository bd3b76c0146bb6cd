// SchedulerFactory: builds the scheduler of a model version from its config.
// Each kind of scheduler registers a builder under a name; the kind a model
// gets is SchedulerKind(spec): "ensemble" for platform "ensemble"
// (ensemble_scheduler.h), else "dynamic" (the DynamicBatcher: dynamic
// batching, or one request at a time without it); sequence and generative
// schedulers register beside them.
//
// Thread-safety: register at start-up; Create is const and thread-safe.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "core/clock.h"
#include "core/cpu_load.h"
#include "core/model_spec.h"
#include "core/request_submitter.h"
#include "metrics/model_stats.h"
#include "scheduler/scheduler.h"

namespace inferd {

class LoraCatalog;  // scheduler/lora_catalog.h

// What a scheduler is built from.
struct SchedulerContext {
  const ModelSpec* spec = nullptr;  // outlives the scheduler
  std::vector<std::unique_ptr<ModelInstance>> instances;
  Clock* clock = nullptr;             // not owned
  CpuLoad* cpu_load = nullptr;        // not owned; may be null (adaptive batching then sees an idle machine)
  std::shared_ptr<ModelStats> stats;  // may be null
  size_t default_max_queue_size = 1024;
  // Runs once on each instance's worker thread before it takes requests.
  std::function<Status(ModelInstance&)> warmup;
  // For schedulers that call other models; not owned, may be null.
  RequestSubmitter* submitter = nullptr;
  // Where the LoRA adapters a generative model's requests name are; not owned, may be null (no adapters).
  const LoraCatalog* loras = nullptr;
};

class SchedulerFactory {
 public:
  using Builder = std::function<Result<std::unique_ptr<Scheduler>>(SchedulerContext context)>;

  // A factory with the built-in kinds registered ("dynamic"); `batch_scheduling`: the dynamic batcher's workers
  // run as SCHED_BATCH (DynamicBatcher::Options).
  static SchedulerFactory WithBuiltins(bool batch_scheduling = true);

  void Register(std::string kind, Builder builder);
  // Builds the scheduler for context.spec; INVALID_ARGUMENT when its kind
  // has no builder.
  Result<std::unique_ptr<Scheduler>> Create(SchedulerContext context) const;

 private:
  std::map<std::string, Builder, std::less<>> builders_;
};

// The scheduler kind a model's config asks for.
std::string SchedulerKind(const ModelSpec& spec);

}  // namespace inferd
