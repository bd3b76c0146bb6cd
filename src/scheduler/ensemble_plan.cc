#include "scheduler/ensemble_plan.h"

#include <algorithm>
#include <map>

namespace inferd {
namespace {

// A tensor's dims as the tensor travels: with the batch dimension in front
// when `batched`. Empty optional: unknown (any rank).
std::optional<Shape> FullDims(const TensorSpec& t, bool batched) {
  if (t.any_rank) return std::nullopt;
  Shape s;
  if (batched) s.push_back(-1);
  s.insert(s.end(), t.dims.begin(), t.dims.end());
  return s;
}

bool Compatible(const Shape& a, const Shape& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != -1 && b[i] != -1 && a[i] != b[i]) return false;
  return true;
}

// What is known of a tensor where it is produced.
struct Produced {
  DataType dtype = DataType::kInvalid;  // kInvalid: unknown
  std::optional<Shape> dims;
  std::string what;  // "ensemble input 'x'", "step 0 (model 'a') output 'y'"
};

}  // namespace

std::string EnsemblePlan::StepName(size_t i) const {
  return "step " + std::to_string(i) + " (model '" + steps[i].model + "')";
}

Result<EnsemblePlan> EnsemblePlan::Compile(const ModelSpec& spec) {
  if (!spec.ensemble) return Status::InvalidArgument("model '" + spec.name + "' is not an ensemble");
  EnsemblePlan p;
  std::map<std::string, int> ids;
  auto id = [&](const std::string& name) {
    auto [it, added] = ids.emplace(name, static_cast<int>(p.tensors.size()));
    if (added) {
      p.tensors.push_back(name);
      p.producer.push_back(-2);  // -2: nothing yet
      p.readers.emplace_back();
    }
    return it->second;
  };
  for (const auto& in : spec.inputs) {
    const int t = id(in.name);
    p.producer[t] = -1;
    p.inputs.push_back(t);
  }
  const auto& steps = spec.ensemble->steps;
  for (size_t i = 0; i < steps.size(); ++i) {
    const EnsembleStepSpec& s = steps[i];
    Step step;
    step.model = s.model_name;
    step.version = s.model_version > 0 ? std::to_string(s.model_version) : "";
    p.steps.push_back(step);
    if (s.model_name == spec.name) return Status::InvalidArgument(p.StepName(i) + " calls the ensemble itself");
    for (const auto& [model_input, tensor] : s.input_map) {
      const int t = id(tensor);
      p.steps[i].inputs.push_back({model_input, t});
      if (std::find(p.steps[i].reads.begin(), p.steps[i].reads.end(), t) == p.steps[i].reads.end()) {
        p.steps[i].reads.push_back(t);
        p.readers[t].push_back(static_cast<int>(i));
      }
    }
    for (const auto& [model_output, tensor] : s.output_map) {
      const int t = id(tensor);
      if (p.producer[t] != -2) {
        const std::string first = p.producer[t] == -1 ? "the ensemble input" : p.StepName(p.producer[t]);
        return Status::InvalidArgument("tensor '" + tensor + "' is produced twice: by " + first + " and by " +
                                       p.StepName(i) + " output '" + model_output + "'");
      }
      p.producer[t] = static_cast<int>(i);
      p.steps[i].outputs.push_back({model_output, t});
    }
  }
  for (size_t i = 0; i < p.steps.size(); ++i) {
    for (const Binding& b : p.steps[i].inputs) {
      if (p.producer[b.tensor] == -2) {
        return Status::InvalidArgument(p.StepName(i) + ": input '" + b.name + "' reads tensor '" + p.tensors[b.tensor] +
                                       "', which no step produces and the ensemble does not "
                                       "take as an input");
      }
    }
  }
  for (const auto& out : spec.outputs) {
    auto it = ids.find(out.name);
    if (it == ids.end() || p.producer[it->second] == -2) {
      return Status::InvalidArgument("ensemble output '" + out.name + "' is not produced by any step");
    }
    p.outputs.push_back(it->second);
  }
  // Kahn's algorithm over "step j reads a tensor step i produces".
  std::vector<int> waiting(p.steps.size(), 0);
  for (size_t i = 0; i < p.steps.size(); ++i)
    for (int t : p.steps[i].reads)
      if (p.producer[t] >= 0) ++waiting[i];
  std::vector<int> ready;
  for (size_t i = 0; i < p.steps.size(); ++i)
    if (waiting[i] == 0) ready.push_back(static_cast<int>(i));
  while (!ready.empty()) {
    const int i = ready.back();
    ready.pop_back();
    p.order.push_back(i);
    for (const Binding& b : p.steps[i].outputs)
      for (int r : p.readers[b.tensor])
        if (--waiting[r] == 0) ready.push_back(r);
  }
  if (p.order.size() != p.steps.size()) {
    std::string names;
    for (size_t i = 0; i < p.steps.size(); ++i)
      if (waiting[i] > 0) names += (names.empty() ? "" : ", ") + p.StepName(i);
    return Status::InvalidArgument("the ensemble's steps form a cycle: " + names);
  }
  return p;
}

Status EnsemblePlan::Check(const ModelSpec& spec, const std::vector<ModelSpec>& models) const {
  if (models.size() != steps.size()) return Status::Internal("one config per step expected");
  const bool batched = spec.max_batch_size > 0;
  std::vector<Produced> produced(tensors.size());
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    produced[inputs[i]] = {spec.inputs[i].dtype, FullDims(spec.inputs[i], batched),
                           "ensemble input '" + spec.inputs[i].name + "'"};
  }
  for (size_t i = 0; i < steps.size(); ++i) {
    const ModelSpec& m = models[i];
    if (m.decoupled) {
      return Status::InvalidArgument(StepName(i) + " is decoupled (answers in parts): not supported in ensembles yet");
    }
    if (batched && m.max_batch_size == 0) {
      return Status::InvalidArgument(StepName(i) + " does not batch (max_batch_size 0) but the ensemble does");
    }
    if (batched && m.max_batch_size < spec.max_batch_size) {
      return Status::InvalidArgument(StepName(i) + " takes batches of at most " + std::to_string(m.max_batch_size) +
                                     ", less than the ensemble's max_batch_size " +
                                     std::to_string(spec.max_batch_size));
    }
    for (const Binding& b : steps[i].outputs) {
      const TensorSpec* out = m.FindOutput(b.name);
      if (out == nullptr && !m.outputs.empty()) {
        return Status::InvalidArgument(StepName(i) + ": output_map key '" + b.name + "' is not an output of model '" +
                                       m.name + "'");
      }
      Produced& p = produced[b.tensor];
      p.what = StepName(i) + " output '" + b.name + "'";
      if (out && !out->dtype_assumed) p.dtype = out->dtype;
      if (out) p.dims = FullDims(*out, m.max_batch_size > 0);
    }
  }
  for (int i : order) {
    const ModelSpec& m = models[i];
    for (const Binding& b : steps[i].inputs) {
      const TensorSpec* in = m.FindInput(b.name);
      if (in == nullptr) {
        return Status::InvalidArgument(StepName(i) + ": input_map key '" + b.name + "' is not an input of model '" +
                                       m.name + "'");
      }
      const Produced& p = produced[b.tensor];
      const std::string edge =
          StepName(i) + ": input '" + b.name + "' reads tensor '" + tensors[b.tensor] + "' (" + p.what + ")";
      if (p.dtype != DataType::kInvalid && p.dtype != in->dtype) {
        return Status::InvalidArgument(edge + ", which is " + std::string(DataTypeToWire(p.dtype)) +
                                       "; the model takes " + std::string(DataTypeToWire(in->dtype)));
      }
      const auto want = FullDims(*in, m.max_batch_size > 0);
      if (p.dims && want && !Compatible(*p.dims, *want)) {
        return Status::InvalidArgument(edge + ", of shape " + ShapeToString(*p.dims) + "; the model takes " +
                                       ShapeToString(*want));
      }
    }
    for (const auto& in : m.inputs) {
      if (in.optional) continue;
      const bool mapped = std::any_of(steps[i].inputs.begin(), steps[i].inputs.end(),
                                      [&](const Binding& b) { return b.name == in.name; });
      if (!mapped) return Status::InvalidArgument(StepName(i) + ": model input '" + in.name + "' is not mapped");
    }
  }
  for (size_t i = 0; i < spec.outputs.size(); ++i) {
    const Produced& p = produced[outputs[i]];
    const TensorSpec& out = spec.outputs[i];
    if (p.dtype != DataType::kInvalid && p.dtype != out.dtype) {
      return Status::InvalidArgument("ensemble output '" + out.name + "' is " + std::string(DataTypeToWire(out.dtype)) +
                                     " in the config but " + p.what + " is " + std::string(DataTypeToWire(p.dtype)));
    }
    const auto want = FullDims(out, batched);
    if (p.dims && want && !Compatible(*p.dims, *want)) {
      return Status::InvalidArgument("ensemble output '" + out.name + "' has shape " + ShapeToString(*want) +
                                     " in the config but " + p.what + " has " + ShapeToString(*p.dims));
    }
  }
  return Status::OK();
}

}  // namespace inferd
