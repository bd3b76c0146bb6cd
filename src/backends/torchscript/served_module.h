// ServedModule: the module a TorchScript model serves -- the plain one it was
// loaded as, replaced by a frozen and optimised one when the model proves hot
// (optimize.h, OptimizeWhen::kWhenHot): after `after_runs` runs, the backend's
// background worker optimises a copy (checked against the plain module, as at
// load) and every instance serves it from its next run on. Until then, and
// when the optimisation fails its check, the plain module serves.
//
// Thread-safety: serving() and CountRun() from any instance's thread (one
// atomic load each; CountRun one relaxed add until the count is reached);
// Optimize on one background thread. Ownership: holds both modules until it
// is destroyed (a run may still be using the plain one), and destroys them
// under the backend's JIT lock.
#pragma once

#include <torch/script.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/torchscript/optimize.h"
#include "core/model_spec.h"
#include "core/mutex.h"

namespace inferd::torchscript {

class ServedModule {
 public:
  // `module` serves from now on; `after_runs` > 0: it is to be optimised once it ran that many times (0: never
  // later -- optimised at load, or not at all).
  ServedModule(std::shared_ptr<Mutex> jit_mu, std::shared_ptr<torch::jit::Module> module, uint64_t after_runs);
  ~ServedModule();
  ServedModule(const ServedModule&) = delete;
  ServedModule& operator=(const ServedModule&) = delete;

  torch::jit::Module& serving() const { return *serving_.load(std::memory_order_acquire); }
  // Counts one run; true once, on the run that reaches `after_runs`: the caller schedules Optimize.
  // Past the count (or with none), a run only reads runs_.
  bool CountRun() {
    if (runs_.load(std::memory_order_relaxed) >= after_runs_) return false;
    return runs_.fetch_add(1, std::memory_order_relaxed) + 1 == after_runs_;
  }
  // Optimises the plain module (under the JIT lock) and, when the check passes, serves the optimised one.
  // Returns what happened, for the log.
  std::string Optimize(const ModelSpec& spec, const std::vector<size_t>& arg_index, size_t num_args);
  bool optimized() const { return &serving() != plain_.get(); }

 private:
  const std::shared_ptr<Mutex> jit_mu_;
  std::shared_ptr<torch::jit::Module> plain_;  // set at construction
  // Set once, under the JIT lock, before serving_ publishes it.
  std::shared_ptr<torch::jit::Module> optimized_module_;
  std::atomic<torch::jit::Module*> serving_;
  const uint64_t after_runs_;
  std::atomic<uint64_t> runs_{0};
};

}  // namespace inferd::torchscript
