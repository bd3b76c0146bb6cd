// EnsemblePlan: an ensemble's steps (ModelSpec::ensemble) compiled into a
// data-flow graph over numbered tensors, and validated the way Triton
// validates ensembles, at load:
//  - structure (Compile): a step that calls the ensemble itself, a tensor
//    produced twice (by two steps, or by a step and the ensemble's input), a
//    step input or ensemble output that nothing produces, steps that form a
//    cycle;
//  - against the composing models' configs (Check): every model input mapped
//    (optional ones may be left out), map keys that are the model's inputs and
//    outputs, datatypes and shapes that agree along every edge.
// Every message names the step (index and model) and the tensor.
// Thread-safety: immutable once built.
#pragma once

#include <string>
#include <vector>

#include "core/model_spec.h"
#include "core/status.h"

namespace inferd {

struct EnsemblePlan {
  struct Binding {
    std::string name;  // the composing model's input or output name
    int tensor = -1;
  };
  struct Step {
    std::string model;
    std::string version;  // "" = the model's default version
    std::vector<Binding> inputs, outputs;
    std::vector<int> reads;  // distinct tensors the step reads
  };
  std::vector<std::string> tensors;       // ensemble tensor names
  std::vector<int> producer;              // per tensor: step index, or -1 for an ensemble input
  std::vector<std::vector<int>> readers;  // per tensor: steps that read it
  std::vector<int> inputs;                // per ensemble input (spec order): its tensor
  std::vector<int> outputs;               // per ensemble output (spec order): its tensor
  std::vector<Step> steps;                // in config order
  std::vector<int> order;                 // a topological order of the steps

  static Result<EnsemblePlan> Compile(const ModelSpec& spec);
  // `models[i]`: the config of steps[i]'s model.
  Status Check(const ModelSpec& spec, const std::vector<ModelSpec>& models) const;

  std::string StepName(size_t i) const;  // "step 1 (model 'classifier')"
};

}  // namespace inferd
