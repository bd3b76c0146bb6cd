// ModelVersion: one loaded, immutable model version: its spec, backend model,
// scheduler (built from the config by the SchedulerFactory; it owns the
// instances and their threads) and statistics.
//
// Lifetime: shared_ptr. Front-end calls copy the pointer while they use it;
// destruction drains the scheduler (every accepted request completes) before
// the backend model is released.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "backends/backend.h"
#include "core/clock.h"
#include "core/cpu_load.h"
#include "core/model_spec.h"
#include "manager/quantization_guard.h"
#include "metrics/model_stats.h"
#include "repository/filesystem.h"
#include "scheduler/scheduler.h"
#include "scheduler/scheduler_factory.h"

namespace inferd {

// The config's `pinned` parameter ("true"/"false", default false): a pinned
// model is loaded at start-up under on-demand residency and never evicted.
Result<bool> PinnedParameter(const ModelSpec& spec);

class ModelVersion {
 public:
  struct Options {
    size_t default_max_queue_size = 1024;
    int default_intra_op_threads = 1;
    // Parameters a config does not set take these values.
    std::map<std::string, std::string> default_parameters;
    Clock* clock = nullptr;                        // not owned
    CpuLoad* cpu_load = nullptr;                   // not owned; may be null
    const SchedulerFactory* schedulers = nullptr;  // not owned; required
    RequestSubmitter* submitter = nullptr;         // not owned; for schedulers that call other models
    const LoraCatalog* loras = nullptr;            // not owned; generative models' LoRA adapters (may be null)
    // Checks what only the server can (e.g. that a hybrid model's prediction
    // store names a configured connection); an error fails the load. May be null.
    std::function<Status(const ModelSpec&)> check_spec;
  };

  // Where a version's files are: the repository's Filesystem (not owned),
  // the model folder (warm-up files) and the version folder in it.
  struct Files {
    const Filesystem* fs = nullptr;
    std::string model_dir;
    std::string version_dir;
  };

  // Auto-completes (when the spec has no inputs), validates, loads and starts
  // the instances. `config_text` is the original config for rendering.
  static Result<std::shared_ptr<ModelVersion>> Load(Backend& backend, ModelSpec spec, int64_t version,
                                                    const Files& files, const std::string& config_text,
                                                    const std::string& config_source, const Options& options);
  ~ModelVersion();

  int64_t version() const { return version_; }
  const std::string& version_string() const { return version_str_; }
  const ModelSpec& spec() const { return spec_; }
  const std::string& config_json() const { return config_json_; }
  Scheduler& scheduler() { return *scheduler_; }
  const std::shared_ptr<ModelStats>& stats() const { return stats_; }

  // Memory the version holds, for budgets and listings: the config's
  // `memory_bytes` parameter when set, else what loading it allocated on the
  // loading thread (jemalloc per-thread counters), else its files' size; plus
  // what its scheduler holds now (Scheduler::HeldBytes: LoRA adapters).
  uint64_t resident_bytes() const { return resident_bytes_ + (scheduler_ ? scheduler_->HeldBytes() : 0); }
  const char* size_source() const { return size_source_; }
  TimePoint loaded_at() const { return loaded_at_; }
  // What the backend's load did worth logging (LoadedModel::LoadNote), and
  // the quantisation's outcome.
  std::string load_note() const;
  // What `quantization: "int8"` came to (requested empty when not asked for).
  const QuantizationReport& quantization() const { return quantization_; }
  // Last request routed here (or the load). Touch is a relaxed store: cheap
  // enough for every request.
  void Touch(TimePoint t) { last_used_ns_.store(t.time_since_epoch().count(), std::memory_order_relaxed); }
  TimePoint last_used() const { return TimePoint(Duration(last_used_ns_.load(std::memory_order_relaxed))); }
  bool busy() const { return stats_->pending() > 0; }

  // Stops accepting and waits for everything accepted to finish.
  void Drain() { scheduler_->Shutdown(); }

 private:
  ModelVersion() = default;
  int64_t version_ = 0;
  std::string version_str_;
  ModelSpec spec_;
  std::string config_json_;
  std::shared_ptr<ModelStats> stats_;
  uint64_t resident_bytes_ = 0;
  const char* size_source_ = "files";
  QuantizationReport quantization_;
  TimePoint loaded_at_{};
  std::atomic<int64_t> last_used_ns_{0};
  std::unique_ptr<LoadedModel> model_;  // destroyed after scheduler_
  std::unique_ptr<Scheduler> scheduler_;
};

}  // namespace inferd
