// Load-time optimisation of a TorchScript module (libtorch stays in this
// folder): torch::jit::freeze (parameters and attributes become constants,
// the graph is folded) then torch::jit::optimize_for_inference (conv + batch
// norm folding, oneDNN layouts and fused ops where they help). Measured on
// the example ResNet-18 at batch 8: ~2x the images/s of the plain module.
//
// The optimised module serves only after it gave the plain module's answer
// on a generated input (random values of each input's datatype and shape;
// batch 2 for batching models, 1 for variable dimensions): every output
// within abs 1e-4 + rel 1e-4 (integer and bool outputs equal). Otherwise, or
// when the input shapes are unknown (auto-completed config), the plain
// module serves and the outcome says why.
//
// Thread-safety: call on the loading thread; the modules are not shared yet.
#pragma once

#include <torch/script.h>

#include <memory>
#include <string>
#include <vector>

#include "backends/torchscript/int8_rewrite.h"
#include "core/model_spec.h"
#include "core/status.h"

namespace inferd::torchscript {

struct Optimized {
  std::shared_ptr<torch::jit::Module> module;  // the module to serve: optimised, or the plain one
  bool optimized = false;
  std::string why_not;      // when !optimized
  double seconds = 0;       // freeze + optimise + check
  double max_abs_diff = 0;  // of the check, when it ran
  Int8Rewrite int8;         // with `int8`: what became int8 (int8_rewrite.h)
};

// Why the optimised module could not be checked against the plain one for
// `spec` (an input without a known shape or of a datatype libtorch lacks),
// as OptimizeForInference would say; "" when it can be.
std::string WhyUncheckable(const ModelSpec& spec);

// `arg_index[i]` is forward()'s argument position of config input i (of
// `num_args`), as TorchModel uses it. `int8`: the frozen module's linear
// products become int8 (int8_rewrite.h) before the optimisation; the check
// against the plain module then asks only for the same shapes and datatypes
// (the accuracy guard judges the values).
Optimized OptimizeForInference(std::shared_ptr<torch::jit::Module> plain, const ModelSpec& spec,
                               const std::vector<size_t>& arg_index, size_t num_args, bool int8 = false);

// Runs libtorch's one-time initialisation, global and of the calling thread
// (JIT executor, freezing and optimisation passes, oneDNN), on a tiny
// built-in module, so that its memory is not counted as the size of the
// first model this thread loads (~4 MiB otherwise; sizes are measured on the
// loading thread). Never fails; best effort.
void WarmUpLibtorch();

// When a module is optimised (docs/model_repository.md), from the config
// parameters OPTIMIZE_FOR_INFERENCE -- "true"/"1": at load; "false"/"0":
// never; "auto" or absent: at load when the module file is at least
// kOptimizeAtLoadBytes, else once the model proves hot -- and
// OPTIMIZE_AFTER_RUNS (default 1,000; 0 = at load): how many times a small
// module runs before it is optimised (on the backend's background thread; the plain
// module serves meanwhile). Optimising costs ~1 ms for a tiny module and
// saves under a microsecond per run: it pays for a model that is used, not
// for one loaded on demand for a few requests.
enum class OptimizeWhen { kNever, kAtLoad, kWhenHot };
struct OptimizePolicy {
  OptimizeWhen when = OptimizeWhen::kAtLoad;
  uint64_t after_runs = 1000;  // kWhenHot
};
inline constexpr uint64_t kOptimizeAtLoadBytes = 1u << 20;
// INVALID_ARGUMENT naming the parameter for a value it does not take.
Result<OptimizePolicy> OptimizePolicyOf(const ModelSpec& spec, uint64_t module_file_bytes);

}  // namespace inferd::torchscript
