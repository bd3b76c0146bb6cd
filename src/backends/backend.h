// The backend interface: how inferd runs a model, whatever its framework.
//
// Lifecycle: Backend::Load turns a model version directory into a
// LoadedModel; the server asks it for `instance_count` ModelInstances; each
// instance runs on its own worker thread.
//
// Registration: a backend is an optional CMake target (src/CMakeLists.txt,
// INFERD_BACKENDS) that provides `Status Register<Name>Backend(BackendRegistry*)`;
// the build generates RegisterBuiltinBackends from the enabled ones. The
// registry checks the interface version the backend was compiled against,
// and resolves a config's `backend` / `platform` fields to a backend with the
// names and platforms each backend declares (Triton's platform names).
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
//  7. LoadNote (optional) says what the load did that an operator should
//     see ("optimised for inference in 0.21 s"); the server logs it with the
//     load. Called on the loading thread.
//  8. PrepareLoadingThread (optional) runs once per backend on each thread
//     that loads models, before its first Load there and outside the window
//     in which a load's allocations are measured as the model's size: the
//     framework's one-time (also per-thread) initialisation belongs here.
//  9. model_filenames (optional) names the files that identify the
//     backend's models: a config naming no backend or platform goes to the
//     backend whose file is in the version folder ("model.onnx").
// 10. Per-request execution (optional): an instance whose takes_requests()
//     is true gets ExecuteRequests instead of Execute: each request's own
//     inputs (spec order, validated, not concatenated; reshape applied) and
//     returns one result per request, in order, so one request's error
//     leaves the others in the batch unaffected (Triton's Python backend).
// 12. Decoupled models (spec.decoupled; only backends whose
//     supports_decoupled() is true load them): ExecuteRequests gets one
//     PartialSender per request and may send zero or more responses through
//     it before returning the request's final result (whose outputs may be
//     empty: "no more responses"). A sender is empty when the request's
//     front end cannot take parts (unary HTTP): the backend then answers with
//     at most one response or an error. Senders are valid until
//     ExecuteRequests returns.
// 13. Scheduler kind (optional): a backend whose models need a scheduler
//     other than the dynamic batcher names it in scheduler_kind()
//     ("generative": backends/generative.h); ResolveSpec records it in the
//     spec, and the SchedulerFactory builds that kind.
// 11. LoadWithContext (optional) gets what the server offers a model besides
//     its files: a RequestSubmitter to call other models (Triton's BLS) and
//     the config rendered as JSON. The default forwards to Load.
// 14. Reduced precision (optional): a backend whose guards_quantization()
//     is true honours the model parameter `quantization` ("int8":
//     docs/quantization.md), says in LoadedModel::quantization() what it
//     replaced, and its instances take Execute; the server runs the accuracy
//     guard (manager/quantization_guard.h) over such a load and one of the
//     same spec with `quantization: "none"`, and keeps the one that passes.
//     Other backends get the parameter as any other (the generative backend
//     reads its own `quantization`: weight-only int8, docs/generative.md).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/infer_request.h"
#include "core/model_spec.h"
#include "core/request_submitter.h"
#include "core/status.h"
#include "core/tensor.h"

namespace inferd {

inline constexpr int kBackendInterfaceVersion = 1;

// Contract 12: sends one partial response's outputs; false when the client is gone.
using PartialSender = std::function<bool(std::vector<Tensor>)>;

class ModelInstance {
 public:
  virtual ~ModelInstance() = default;
  virtual void OnWorkerThreadStart() {}
  virtual Result<std::vector<Tensor>> Execute(const std::vector<Tensor>& inputs) = 0;
  // Contract 10.
  virtual bool takes_requests() const { return false; }
  // `partial`: contract 12 (decoupled models); empty otherwise.
  virtual std::vector<Result<std::vector<Tensor>>> ExecuteRequests(const std::vector<const InferRequest*>& requests,
                                                                   const std::vector<PartialSender>& partial);
};

// Contract 14: what a load replaced by reduced-precision kernels.
struct QuantizationInfo {
  std::string precision;                         // "int8"; "" when nothing was replaced
  int layers = 0;                                // layers (weights) replaced
  int64_t float_bytes = 0, quantized_bytes = 0;  // those weights' bytes before and after
  std::string kernel;                            // the kernels that run them ("avx512vnni")
};

class LoadedModel {
 public:
  virtual ~LoadedModel() = default;
  virtual Result<std::unique_ptr<ModelInstance>> CreateInstance(int index) = 0;
  virtual std::string LoadNote() const { return ""; }
  // Contract 14.
  virtual QuantizationInfo quantization() const { return {}; }
};

// Contract 11. Pointers are not owned and outlive the loaded model.
struct LoadContext {
  RequestSubmitter* submitter = nullptr;  // null where no server runs (bench, tools)
  std::string config_json;                // the config as Triton renders it ("{}" when unknown)
};

class Backend {
 public:
  virtual ~Backend() = default;
  // The name configs use in `backend:` ("pytorch").
  virtual std::string_view name() const = 0;
  // Contract 8.
  virtual void PrepareLoadingThread() {}
  // Other `backend:` names accepted for it ("torchscript", "libtorch").
  virtual std::vector<std::string> aliases() const { return {}; }
  // The `platform:` values it serves, the first being the one reported for
  // models whose config names none ("pytorch_libtorch").
  virtual std::vector<std::string> platforms() const { return {}; }
  // Contract 9.
  virtual std::vector<std::string> model_filenames() const { return {}; }
  // Contract 12.
  virtual bool supports_decoupled() const { return false; }
  // Contract 13: "" for the default.
  virtual std::string_view scheduler_kind() const { return ""; }
  // Contract 14.
  virtual bool guards_quantization() const { return false; }
  // The interface version this backend was compiled against (inline: the
  // value comes from the header the backend saw).
  virtual int interface_version() const { return kBackendInterfaceVersion; }

  // Fills what the spec lacks (inputs, outputs) from the model file in
  // `version_dir`, when the backend can. Called only for specs with no inputs.
  virtual Status AutoComplete(const std::string& version_dir, ModelSpec* spec) = 0;

  // Loads one version. `spec` is complete and validated.
  virtual Result<std::unique_ptr<LoadedModel>> Load(const ModelSpec& spec, const std::string& version_dir) = 0;
  // Contract 11.
  virtual Result<std::unique_ptr<LoadedModel>> LoadWithContext(const ModelSpec& spec, const std::string& version_dir,
                                                               const LoadContext& context) {
    (void)context;
    return Load(spec, version_dir);
  }
};

// Backends by name, alias and platform. Not thread-safe for registration;
// register at start-up, then look up from any thread.
class BackendRegistry {
 public:
  // Fails on an interface version other than kBackendInterfaceVersion and on
  // a name, alias or platform another backend already has.
  Status Register(std::unique_ptr<Backend> backend);
  // By name or alias.
  Backend* Find(std::string_view name) const;
  // The backend for a config: by `backend` (name or alias) when given, else
  // by `platform`, else the backend one of whose model_filenames is among
  // `files` (the names in the newest version folder), else the default
  // backend (pytorch, as Triton infers it from model.pt). NOT_FOUND names
  // what is registered.
  Result<Backend*> Resolve(std::string_view backend, std::string_view platform,
                           const std::vector<std::string>& files = {}) const;
  // Resolve for a spec, then sets spec->backend to the backend's name and,
  // when the config names no platform, spec->platform to its first one.
  // Errors name the config field at fault.
  Result<Backend*> ResolveSpec(ModelSpec* spec, const std::vector<std::string>& files = {}) const;
  std::vector<std::string> Names() const;
  // "pytorch (platforms: pytorch_libtorch), identity" for error messages.
  std::string Describe() const;

 private:
  std::map<std::string, std::unique_ptr<Backend>, std::less<>> backends_;
  std::map<std::string, Backend*, std::less<>> by_alias_;  // names and aliases
  std::map<std::string, Backend*, std::less<>> by_platform_;
};

// The backends this build includes (generated from INFERD_BACKENDS).
Status RegisterBuiltinBackends(BackendRegistry* registry);

}  // namespace inferd
