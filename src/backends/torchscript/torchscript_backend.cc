#include "backends/torchscript/torchscript_backend.h"

#include <ATen/Parallel.h>
#include <spdlog/spdlog.h>
#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/script.h>

#include <charconv>
#include <filesystem>

#include "backends/aten/blas_threads.h"
#include "backends/aten/torch_convert.h"
#include "backends/torchscript/optimize.h"
#include "backends/torchscript/served_module.h"
#include "core/mutex.h"
#include "core/serial_worker.h"
#include "quant/int8_gemm.h"

namespace inferd {
namespace {

using aten::FromTorch;
using aten::Message;
using aten::ToTorch;

std::string ModelPath(const ModelSpec& spec, const std::string& version_dir) {
  const std::string file = spec.default_model_filename.empty() ? "model.pt" : spec.default_model_filename;
  return (std::filesystem::path(version_dir) / file).string();
}

Result<std::shared_ptr<torch::jit::Module>> LoadModule(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return Status::NotFound("model file '" + path + "' does not exist");
  try {
    auto m = std::make_shared<torch::jit::Module>(torch::jit::load(path, torch::kCPU));
    m->eval();
    return m;
  } catch (const std::exception& e) {
    return Status::InvalidArgument("cannot load TorchScript file '" + path + "': " + Message(e, 500));
  }
}

// forward()'s argument names, without `self`.
std::vector<std::string> ForwardArgs(const torch::jit::Module& m, std::vector<bool>* has_default) {
  std::vector<std::string> names;
  const auto& schema = m.get_method("forward").function().getSchema();
  for (size_t i = 1; i < schema.arguments().size(); ++i) {
    names.push_back(schema.arguments()[i].name());
    if (has_default) has_default->push_back(schema.arguments()[i].default_value().has_value());
  }
  return names;
}

// Outputs as forward() declares them: a tensor is OUTPUT__0, a tuple of
// tensors OUTPUT__<i> (Triton's names; ConvertOutputs maps them back). The
// datatype is the graph's where it states one (traced modules), else FP32,
// as for auto-completed inputs (TorchScript records no dtype for scripted
// code; then answers carry the datatype the model produces). Shapes are left
// open. Other returns (dicts, lists) give no outputs:
// their names are known only when the model runs.
std::vector<TensorSpec> ForwardOutputs(torch::jit::Module& m) {
  auto graph = m.get_method("forward").graph();
  if (graph->outputs().size() != 1) return {};
  const c10::TypePtr type = graph->outputs()[0]->type();
  std::vector<c10::TypePtr> elems;
  if (auto tuple = type->cast<c10::TupleType>()) {
    elems.assign(tuple->elements().begin(), tuple->elements().end());
  } else {
    elems.push_back(type);
  }
  std::vector<TensorSpec> out;
  for (size_t i = 0; i < elems.size(); ++i) {
    auto tensor = elems[i]->cast<c10::TensorType>();
    if (!tensor) return {};
    TensorSpec t;
    t.name = "OUTPUT__" + std::to_string(i);
    t.dtype = DataType::kFp32;
    t.dtype_assumed = true;
    if (auto st = tensor->scalarType()) {
      if (auto dt = aten::FromTorchType(*st)) {
        t.dtype = *dt;
        t.dtype_assumed = false;
      }
    }
    t.any_rank = true;
    out.push_back(std::move(t));
  }
  return out;
}

// Triton's convention: a name ending in "__<n>" takes tuple element n.
std::optional<size_t> IndexSuffix(const std::string& name) {
  auto pos = name.rfind("__");
  if (pos == std::string::npos || pos + 2 >= name.size()) return std::nullopt;
  size_t v = 0;
  auto [p, ec] = std::from_chars(name.data() + pos + 2, name.data() + name.size(), v);
  if (ec != std::errc() || p != name.data() + name.size()) return std::nullopt;
  return v;
}

class TorchModel;

class TorchInstance final : public ModelInstance {
 public:
  explicit TorchInstance(const TorchModel* model) : model_(model) {}
  void OnWorkerThreadStart() override;
  Result<std::vector<Tensor>> Execute(const std::vector<Tensor>& inputs) override;

 private:
  Result<std::vector<Tensor>> ConvertOutputs(const c10::IValue& result) const;
  const TorchModel* model_;
};

class TorchModel final : public LoadedModel {
 public:
  // `later`: the background worker that optimises `module` once the model proves hot (served->CountRun()).
  TorchModel(std::shared_ptr<SerialWorker> later, ModelSpec spec, std::string version,
             std::shared_ptr<torchscript::ServedModule> served, std::vector<size_t> arg_index, size_t num_args,
             int intra_op_threads, bool optimized_execution, std::string load_note, QuantizationInfo quantization)
      : later_(std::move(later)),
        spec_(std::make_shared<const ModelSpec>(std::move(spec))),
        version_(std::move(version)),
        served_(std::move(served)),
        arg_index_(std::move(arg_index)),
        num_args_(num_args),
        intra_op_threads_(intra_op_threads),
        optimized_execution_(optimized_execution),
        load_note_(std::move(load_note)),
        quantization_(std::move(quantization)) {}

  Result<std::unique_ptr<ModelInstance>> CreateInstance(int) override {
    return std::unique_ptr<ModelInstance>(new TorchInstance(this));
  }
  std::string LoadNote() const override { return load_note_; }
  QuantizationInfo quantization() const override { return quantization_; }

  const ModelSpec& spec() const { return *spec_; }
  torch::jit::Module& module() const { return served_->serving(); }
  // After a run: the run that makes the model hot sends its optimisation to the background worker (the job holds
  // the served module, not the model: an evicted model's optimisation finishes, or is dropped, on its own).
  void CountRun() const {
    if (!served_->CountRun()) return;
    later_->Post([served = served_, spec = spec_, index = arg_index_, n = num_args_, version = version_] {
      const std::string what = served->Optimize(*spec, index, n);
      spdlog::info("model '{}' version {}: {}", spec->name, version, what);
    });
  }
  const std::vector<size_t>& arg_index() const { return arg_index_; }
  size_t num_args() const { return num_args_; }
  int intra_op_threads() const { return intra_op_threads_; }
  bool optimized_execution() const { return optimized_execution_; }

 private:
  const std::shared_ptr<SerialWorker> later_;  // the backend's (shared: a model may outlive nothing but the backend)
  const std::shared_ptr<const ModelSpec> spec_;
  const std::string version_;
  const std::shared_ptr<torchscript::ServedModule> served_;  // destroys the modules under the JIT lock
  std::vector<size_t> arg_index_;                            // config input i -> forward argument position
  size_t num_args_;
  int intra_op_threads_;
  bool optimized_execution_;  // false: DISABLE_OPTIMIZED_EXECUTION
  std::string load_note_;
  QuantizationInfo quantization_;  // contract 14: the linear layers int8_rewrite.h replaced
};

void TorchInstance::OnWorkerThreadStart() {
  aten::KeepBlasOnCallingThread();  // blas_threads.h
  aten::SetIntraOpThreads(model_->intra_op_threads());
}

Result<std::vector<Tensor>> TorchInstance::Execute(const std::vector<Tensor>& inputs) {
  try {
    c10::InferenceMode guard;
    torch::jit::GraphOptimizerEnabledGuard optimize(model_->optimized_execution());
    std::vector<c10::IValue> args(model_->num_args());
    for (size_t i = 0; i < inputs.size(); ++i) {
      INFERD_ASSIGN_OR_RETURN(at::Tensor t, ToTorch(inputs[i]));
      args[model_->arg_index()[i]] = std::move(t);
    }
    c10::IValue result = model_->module().forward(std::move(args));
    model_->CountRun();
    return ConvertOutputs(result);
  } catch (const std::exception& e) {
    return Status::Internal("model '" + model_->spec().name + "' failed: " + Message(e, 1000));
  }
}

Result<std::vector<Tensor>> TorchInstance::ConvertOutputs(const c10::IValue& result) const {
  const auto& outs = model_->spec().outputs;
  std::vector<Tensor> produced;
  auto name_for = [&](size_t i) { return i < outs.size() ? outs[i].name : "OUTPUT__" + std::to_string(i); };
  if (result.isTensor()) {
    INFERD_ASSIGN_OR_RETURN(Tensor t, FromTorch(result.toTensor(), name_for(0)));
    produced.push_back(std::move(t));
    return produced;
  }
  if (result.isTuple() || result.isList()) {
    std::vector<c10::IValue> elems;
    if (result.isTuple()) {
      const auto& e = result.toTupleRef().elements();
      elems.assign(e.begin(), e.end());
    } else {
      for (const auto& v : result.toListRef()) elems.push_back(v);
    }
    auto element = [&](size_t i, const std::string& name) -> Result<Tensor> {
      if (i >= elems.size() || !elems[i].isTensor()) {
        return Status::Internal("model output " + std::to_string(i) + " ('" + name + "') is missing or not a tensor");
      }
      return FromTorch(elems[i].toTensor(), name);
    };
    if (outs.empty()) {
      for (size_t i = 0; i < elems.size(); ++i) {
        INFERD_ASSIGN_OR_RETURN(Tensor t, element(i, name_for(i)));
        produced.push_back(std::move(t));
      }
      return produced;
    }
    bool all_indexed = true;
    for (const auto& o : outs) all_indexed = all_indexed && IndexSuffix(o.name).has_value();
    for (size_t i = 0; i < outs.size(); ++i) {
      const size_t idx = all_indexed ? *IndexSuffix(outs[i].name) : i;
      INFERD_ASSIGN_OR_RETURN(Tensor t, element(idx, outs[i].name));
      produced.push_back(std::move(t));
    }
    return produced;
  }
  if (result.isGenericDict()) {
    auto dict = result.toGenericDict();
    if (outs.empty()) {
      for (const auto& kv : dict) {
        if (!kv.key().isString() || !kv.value().isTensor())
          return Status::Internal("model returned a dict that is not Dict[str, Tensor]");
        INFERD_ASSIGN_OR_RETURN(Tensor t, FromTorch(kv.value().toTensor(), kv.key().toStringRef()));
        produced.push_back(std::move(t));
      }
      return produced;
    }
    for (const auto& o : outs) {
      auto it = dict.find(c10::IValue(o.name));
      if (it == dict.end() || !it->value().isTensor()) {
        return Status::Internal("model returned no tensor under the dict key '" + o.name + "'");
      }
      INFERD_ASSIGN_OR_RETURN(Tensor t, FromTorch(it->value().toTensor(), o.name));
      produced.push_back(std::move(t));
    }
    return produced;
  }
  return Status::Internal("model returned " + result.tagKind() +
                          "; expected a tensor, a tuple/list of tensors or a Dict[str, Tensor]");
}

// Triton's pytorch-backend parameter: "true" turns TorchScript's optimizing
// graph executor off for this model (on some CPUs its specialised graphs are
// slower at larger batch sizes; see docs/model_repository.md).
bool OptimizedExecution(const ModelSpec& spec) {
  auto it = spec.parameters.find("DISABLE_OPTIMIZED_EXECUTION");
  return it == spec.parameters.end() || (it->second != "true" && it->second != "1");
}

int ParseThreads(const ModelSpec& spec) {
  auto it = spec.parameters.find("INTRA_OP_THREAD_COUNT");
  if (it == spec.parameters.end()) return 1;
  int n = 1;
  std::from_chars(it->second.data(), it->second.data() + it->second.size(), n);
  return std::max(1, n);
}

class TorchScriptBackend final : public Backend {
 public:
  std::string_view name() const override { return "pytorch"; }
  void PrepareLoadingThread() override {
    MutexLock g(jit_mu_.get());
    torchscript::WarmUpLibtorch();
  }
  std::vector<std::string> aliases() const override { return {"torchscript", "libtorch"}; }
  std::vector<std::string> platforms() const override { return {"pytorch_libtorch", "torchscript"}; }
  // Contract 14: quantization "int8" (int8_rewrite.h).
  bool guards_quantization() const override { return true; }

  Status AutoComplete(const std::string& version_dir, ModelSpec* spec) override {
    MutexLock g(jit_mu_.get());
    INFERD_ASSIGN_OR_RETURN(auto module, LoadModule(ModelPath(*spec, version_dir)));
    try {
      std::vector<bool> has_default;
      auto args = ForwardArgs(*module, &has_default);
      for (size_t i = 0; i < args.size(); ++i) {
        if (has_default[i]) continue;
        TensorSpec t;
        t.name = args[i];
        t.dtype = DataType::kFp32;
        t.any_rank = true;
        spec->inputs.push_back(std::move(t));
      }
      if (spec->outputs.empty()) spec->outputs = ForwardOutputs(*module);
    } catch (const std::exception& e) {
      return Status::InvalidArgument(std::string("cannot read forward() of the TorchScript module: ") +
                                     Message(e, 500));
    }
    if (spec->platform.empty()) spec->platform = "pytorch_libtorch";
    return Status::OK();
  }

  Result<std::unique_ptr<LoadedModel>> Load(const ModelSpec& spec, const std::string& version_dir) override {
    MutexLock g(jit_mu_.get());
    for (const auto& t : spec.inputs) {
      if (!aten::ToTorchType(t.dtype)) {
        return Status::InvalidArgument("input '" + t.name + "': datatype " + std::string(DataTypeToWire(t.dtype)) +
                                       " is not supported by the pytorch backend");
      }
    }
    for (const auto& t : spec.outputs) {
      if (!aten::ToTorchType(t.dtype)) {
        return Status::InvalidArgument("output '" + t.name + "': datatype " + std::string(DataTypeToWire(t.dtype)) +
                                       " is not supported by the pytorch backend");
      }
    }
    INFERD_ASSIGN_OR_RETURN(auto module, LoadModule(ModelPath(spec, version_dir)));
    std::vector<bool> has_default;
    std::vector<std::string> args;
    try {
      args = ForwardArgs(*module, &has_default);
    } catch (const std::exception& e) {
      return Status::InvalidArgument(std::string("TorchScript module has no usable forward(): ") + Message(e, 500));
    }
    size_t required = 0;
    for (bool d : has_default) required += d ? 0 : 1;
    // The config's inputs, then its batch inputs (ragged batching).
    const std::vector<TensorSpec> inputs = spec.BackendInputs();
    if (inputs.size() < required || inputs.size() > args.size()) {
      return Status::InvalidArgument("model '" + spec.name + "' config declares " + std::to_string(inputs.size()) +
                                     " inputs but forward() takes " + std::to_string(required) +
                                     (required == args.size() ? "" : " to " + std::to_string(args.size())));
    }
    // By name when every config input names a forward() argument (then all
    // arguments must be covered), else positionally in config order.
    std::vector<size_t> index(inputs.size());
    bool by_name = true;
    for (size_t i = 0; i < inputs.size() && by_name; ++i) {
      auto it = std::find(args.begin(), args.end(), inputs[i].name);
      by_name = it != args.end();
      if (by_name) index[i] = static_cast<size_t>(it - args.begin());
    }
    if (by_name && inputs.size() != args.size()) {
      return Status::InvalidArgument("model '" + spec.name +
                                     "': inputs mapped by name must cover every forward() argument");
    }
    if (!by_name)
      for (size_t i = 0; i < index.size(); ++i) index[i] = i;
    const size_t num_args = inputs.size();
    std::error_code size_ec;
    const uint64_t file_bytes = std::filesystem::file_size(ModelPath(spec, version_dir), size_ec);
    INFERD_ASSIGN_OR_RETURN(torchscript::OptimizePolicy policy,
                            torchscript::OptimizePolicyOf(spec, size_ec ? 0 : file_bytes));
    // quantization "int8": the linear layers on int8 kernels (int8_rewrite.h), done while optimising, so at load
    // (a module that is never optimised -- OPTIMIZE_FOR_INFERENCE false -- replaces nothing).
    // The guard's FP32 copy ("none") is optimised at load too, so the speed-up it reports is int8's alone.
    bool int8 = false;
    if (auto q = spec.parameters.find("quantization"); q != spec.parameters.end()) {
      if (q->second != "int8" && q->second != "none" && !q->second.empty()) {
        return Status::InvalidArgument("parameter quantization is \"int8\" or \"none\", not \"" + q->second + "\"");
      }
      int8 = q->second == "int8";
      if (!q->second.empty() && policy.when == torchscript::OptimizeWhen::kWhenHot)
        policy.when = torchscript::OptimizeWhen::kAtLoad;
    }
    QuantizationInfo quantization;
    std::string note = "not optimised (OPTIMIZE_FOR_INFERENCE false)";
    uint64_t optimize_after = 0;
    if (!spec.batch_inputs.empty() || spec.HasRaggedInputs()) {
      note = "not optimised (ragged batching: no example inputs to check the optimised module with)";
    } else if (policy.when == torchscript::OptimizeWhen::kAtLoad) {
      torchscript::Optimized opt = torchscript::OptimizeForInference(module, spec, index, num_args, int8);
      module = std::move(opt.module);
      char secs[32];
      std::snprintf(secs, sizeof secs, "%.3f s", opt.seconds);
      note = opt.optimized ? "frozen and optimised for inference in " + std::string(secs)
                           : "not optimised (" + opt.why_not + "; tried in " + secs + ")";
      if (opt.int8.layers > 0) {
        quantization = {"int8", opt.int8.layers, opt.int8.float_bytes, opt.int8.quantized_bytes,
                        std::string(quant::Int8KernelName())};
        note += "; " + std::to_string(opt.int8.layers) + " linear layer(s) on int8 kernels";
      }
    } else if (std::string why = torchscript::WhyUncheckable(spec);
               policy.when == torchscript::OptimizeWhen::kWhenHot && !why.empty()) {
      note = "not optimised (" + why + ")";  // it never could be: nothing to wait for
    } else if (policy.when == torchscript::OptimizeWhen::kWhenHot) {
      optimize_after = policy.after_runs;
      note = "to be frozen and optimised for inference after " + std::to_string(optimize_after) +
             " runs (a small module: OPTIMIZE_FOR_INFERENCE auto)";
    }
    auto served = std::make_shared<torchscript::ServedModule>(jit_mu_, std::move(module), optimize_after);
    return std::unique_ptr<LoadedModel>(new TorchModel(
        later_, spec, std::filesystem::path(version_dir).filename(), std::move(served), std::move(index), num_args,
        ParseThreads(spec), OptimizedExecution(spec), std::move(note), std::move(quantization)));
  }

 private:
  // JIT lock: loading (deserialising, freezing, optimising) and destroying
  // TorchScript modules happen one at a time. libtorch 1.13's JIT shares
  // graphs and compilation units between modules through reference counts
  // in uninstrumented code; a model evicted on one loader thread while
  // another loads raced there under TSan. Running models is not serialised.
  std::shared_ptr<Mutex> jit_mu_ = std::make_shared<Mutex>();
  // Optimises models that prove hot, one at a time (its thread starts with the first).
  std::shared_ptr<SerialWorker> later_ = std::make_shared<SerialWorker>();
};

}  // namespace

Status RegisterTorchScriptBackend(BackendRegistry* registry) { return registry->Register(MakeTorchScriptBackend()); }

std::unique_ptr<Backend> MakeTorchScriptBackend() { return std::make_unique<TorchScriptBackend>(); }

}  // namespace inferd
