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

#include "core/model_spec.h"

namespace inferd::torchscript {

struct Optimized {
  std::shared_ptr<torch::jit::Module> module;  // the module to serve: optimised, or the plain one
  bool optimized = false;
  std::string why_not;      // when !optimized
  double seconds = 0;       // freeze + optimise + check
  double max_abs_diff = 0;  // of the check, when it ran
};

// `arg_index[i]` is forward()'s argument position of config input i (of
// `num_args`), as TorchModel uses it.
Optimized OptimizeForInference(std::shared_ptr<torch::jit::Module> plain, const ModelSpec& spec,
                               const std::vector<size_t>& arg_index, size_t num_args);

// Runs libtorch's one-time initialisation, global and of the calling thread
// (JIT executor, freezing and optimisation passes, oneDNN), on a tiny
// built-in module, so that its memory is not counted as the size of the
// first model this thread loads (~4 MiB otherwise; sizes are measured on the
// loading thread). Never fails; best effort.
void WarmUpLibtorch();

// The config parameter OPTIMIZE_FOR_INFERENCE: "false"/"0" turns it off
// (default on).
bool OptimizeForInferenceEnabled(const ModelSpec& spec);

}  // namespace inferd::torchscript
