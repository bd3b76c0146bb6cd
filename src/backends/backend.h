// The backend interface: how inferd runs a model, whatever its framework.
//
// Lifecycle: Backend::Load turns a model version directory into a
// LoadedModel; the server asks it for `instance_count` ModelInstances; each
// instance runs on its own worker thread.
//
// Contract for implementers (INTERFACE_VERSION 1):
//  1. ModelInstance::Execute is never called concurrently on one instance;
//     different instances of one LoadedModel may execute concurrently.
//  2. OnWorkerThreadStart runs once on the instance's worker thread before the
//     first Execute: set per-thread state (e.g. intra-op thread counts) there.
//  3. Inputs arrive in ModelSpec::inputs order, already validated against the
//     spec (datatype, shape) and concatenated along the batch dimension when
//     max_batch_size > 0; `reshape` from the config is already applied.
//  4. Execute returns one tensor per produced output, named as in the spec
//     (or, for auto-completed specs without outputs, named by the backend).
//     Outputs of batched models have the batch dimension first. Returned
//     tensors may alias backend memory through Tensor::owner.
//  5. Exceptions never escape: backends convert them into Status.
//  6. A LoadedModel outlives all instances created from it (the server keeps
//     both alive while requests hold a handle).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/model_spec.h"
#include "core/status.h"
#include "core/tensor.h"

namespace inferd {

inline constexpr int kBackendInterfaceVersion = 1;

class ModelInstance {
 public:
  virtual ~ModelInstance() = default;
  virtual void OnWorkerThreadStart() {}
  virtual Result<std::vector<Tensor>> Execute(const std::vector<Tensor>& inputs) = 0;
};

class LoadedModel {
 public:
  virtual ~LoadedModel() = default;
  virtual Result<std::unique_ptr<ModelInstance>> CreateInstance(int index) = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;

  // Fills what the spec lacks (inputs, outputs) from the model file in
  // `version_dir`, when the backend can. Called only for specs with no inputs.
  virtual Status AutoComplete(const std::string& version_dir, ModelSpec* spec) = 0;

  // Loads one version. `spec` is complete and validated.
  virtual Result<std::unique_ptr<LoadedModel>> Load(const ModelSpec& spec, const std::string& version_dir) = 0;
};

// Backends by name. Not thread-safe for registration; register at start-up,
// then Find from any thread.
class BackendRegistry {
 public:
  void Register(std::unique_ptr<Backend> backend);
  Backend* Find(std::string_view name) const;
  std::vector<std::string> Names() const;

 private:
  std::map<std::string, std::unique_ptr<Backend>, std::less<>> backends_;
};

}  // namespace inferd
