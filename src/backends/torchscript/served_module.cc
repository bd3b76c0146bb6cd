#include "backends/torchscript/served_module.h"

#include <cstdio>

namespace inferd::torchscript {

ServedModule::ServedModule(std::shared_ptr<Mutex> jit_mu, std::shared_ptr<torch::jit::Module> module,
                           uint64_t after_runs)
    : jit_mu_(std::move(jit_mu)), plain_(std::move(module)), serving_(plain_.get()), after_runs_(after_runs) {}

ServedModule::~ServedModule() {
  MutexLock g(jit_mu_.get());
  optimized_module_.reset();
  plain_.reset();
}

std::string ServedModule::Optimize(const ModelSpec& spec, const std::vector<size_t>& arg_index, size_t num_args) {
  MutexLock g(jit_mu_.get());
  Optimized o = OptimizeForInference(plain_, spec, arg_index, num_args);
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.3f s", o.seconds);
  const std::string runs = std::to_string(after_runs_);
  if (!o.optimized) {
    o.module.reset();  // the plain module: still ours
    return "not optimised after " + runs + " runs (" + o.why_not + "; tried in " + secs + ")";
  }
  optimized_module_ = std::move(o.module);
  serving_.store(optimized_module_.get(), std::memory_order_release);
  return "frozen and optimised for inference after " + runs + " runs in " + secs;
}

}  // namespace inferd::torchscript
