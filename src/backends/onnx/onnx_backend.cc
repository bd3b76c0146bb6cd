#include "backends/onnx/onnx_backend.h"

#include <ATen/Parallel.h>

#include <charconv>
#include <cstring>
#include <filesystem>

#include "backends/aten/alloc_limit.h"
#include "backends/aten/blas_threads.h"
#include "backends/aten/torch_convert.h"
#include "backends/onnx/model_loader.h"
#include "backends/onnx/tensor_proto.h"
#include "core/byte_size.h"
#include "quant/int8_gemm.h"

namespace inferd {
namespace {

using onnxexec::IoInfo;
using onnxexec::OnnxModel;
using onnxexec::Value;

constexpr int kAutoMaxBatchSize = 32;

// No tensor a graph makes (at load, folding constants, or serving a call)
// may be larger than this unless the config says otherwise (alloc_limit.h).
constexpr int64_t kDefaultMaxTensorBytes = int64_t{2} << 30;

// Parameter MAX_TENSOR_BYTES: a byte size ("512MiB", "2GiB", bytes); 0
// removes the cap.
Result<int64_t> MaxTensorBytes(const ModelSpec& spec) {
  auto it = spec.parameters.find("MAX_TENSOR_BYTES");
  if (it == spec.parameters.end()) return kDefaultMaxTensorBytes;
  auto n = ParseByteSize(it->second);
  if (!n.ok()) {
    return Status::InvalidArgument(
        "parameter MAX_TENSOR_BYTES must be a byte size (\"512MiB\", \"4GiB\", bytes; "
        "0: no limit), got '" +
        it->second + "'");
  }
  return static_cast<int64_t>(*n);
}

std::string ModelPath(const ModelSpec& spec, const std::string& version_dir) {
  return (std::filesystem::path(version_dir) /
          (spec.default_model_filename.empty() ? "model.onnx" : spec.default_model_filename))
      .string();
}

int Threads(const ModelSpec& spec) {
  auto it = spec.parameters.find("INTRA_OP_THREAD_COUNT");
  int n = 1;
  if (it != spec.parameters.end()) std::from_chars(it->second.data(), it->second.data() + it->second.size(), n);
  return std::max(1, n);
}

Result<Value> ToValue(const Tensor& t) {
  if (t.dtype == DataType::kBytes) {
    INFERD_ASSIGN_OR_RETURN(auto elems, SplitBytesElements(t.bytes()));
    onnxexec::StringTensor s;
    s.shape.assign(t.shape.begin(), t.shape.end());
    for (auto e : elems) s.data.emplace_back(e);
    return Value::Of(std::move(s));
  }
  INFERD_ASSIGN_OR_RETURN(at::Tensor a, aten::ToTorch(t));
  // Views of request bodies may be misaligned for their type.
  if (reinterpret_cast<uintptr_t>(t.data) % a.element_size() != 0) a = a.clone();
  return Value::Of(a);
}

Result<Tensor> FromValue(const Value& v, const std::string& name) {
  if (v.is_strings()) {
    auto buffer = std::make_shared<std::string>();
    for (const auto& s : v.strings().data) AppendBytesElement(buffer.get(), s);
    Shape shape(v.strings().shape.begin(), v.strings().shape.end());
    return Tensor::Own(name, DataType::kBytes, std::move(shape), buffer);
  }
  if (!v.is_tensor()) return Status::Internal("output '" + name + "' is not a tensor (sequences cannot be returned)");
  return aten::FromTorch(v.tensor(), name);
}

class OnnxLoaded;

class OnnxInstance final : public ModelInstance {
 public:
  explicit OnnxInstance(const OnnxLoaded* model) : model_(model) {}
  void OnWorkerThreadStart() override;
  Result<std::vector<Tensor>> Execute(const std::vector<Tensor>& inputs) override;

 private:
  const OnnxLoaded* model_;
};

class OnnxLoaded final : public LoadedModel {
 public:
  OnnxLoaded(ModelSpec spec, OnnxModel model, std::vector<size_t> input_slot, std::vector<size_t> output_index,
             std::string note, int64_t max_tensor_bytes)
      : spec_(std::move(spec)),
        model_(std::move(model)),
        input_slot_(std::move(input_slot)),
        output_index_(std::move(output_index)),
        note_(std::move(note)),
        threads_(Threads(spec_)),
        max_tensor_bytes_(max_tensor_bytes) {}

  Result<std::unique_ptr<ModelInstance>> CreateInstance(int) override {
    return std::unique_ptr<ModelInstance>(new OnnxInstance(this));
  }
  std::string LoadNote() const override { return note_; }
  QuantizationInfo quantization() const override {
    const onnxexec::QuantizationTally& t = model_.quantized;
    if (t.layers == 0) return {};
    return {"int8", t.layers, t.float_bytes, t.int8_bytes, std::string(quant::Int8KernelName())};
  }

  const ModelSpec& spec() const { return spec_; }
  const OnnxModel& model() const { return model_; }
  const std::vector<size_t>& input_slot() const { return input_slot_; }
  const std::vector<size_t>& output_index() const { return output_index_; }
  int threads() const { return threads_; }
  int64_t max_tensor_bytes() const { return max_tensor_bytes_; }

 private:
  ModelSpec spec_;
  OnnxModel model_;
  std::vector<size_t> input_slot_;    // config input i -> graph input position
  std::vector<size_t> output_index_;  // answer j -> graph output position
  std::string note_;
  int threads_;
  int64_t max_tensor_bytes_;
};

void OnnxInstance::OnWorkerThreadStart() {
  aten::KeepBlasOnCallingThread();  // blas_threads.h
  aten::SetIntraOpThreads(model_->threads());
}

Result<std::vector<Tensor>> OnnxInstance::Execute(const std::vector<Tensor>& inputs) {
  try {
    c10::InferenceMode guard;
    aten::AllocationLimitScope limit(model_->max_tensor_bytes());
    std::vector<Value> args(model_->model().inputs.size());
    for (size_t i = 0; i < inputs.size() && i < model_->input_slot().size(); ++i) {
      INFERD_ASSIGN_OR_RETURN(args[model_->input_slot()[i]], ToValue(inputs[i]));
    }
    std::vector<Value> results;
    INFERD_RETURN_IF_ERROR(model_->model().plan->Run(std::move(args), &results));
    std::vector<Tensor> out;
    for (size_t idx : model_->output_index()) {
      INFERD_ASSIGN_OR_RETURN(Tensor t, FromValue(results[idx], model_->model().outputs[idx].name));
      out.push_back(std::move(t));
    }
    return out;
  } catch (const std::exception& e) {
    return Status::Internal("model '" + model_->spec().name + "' failed: " + aten::Message(e, 1000));
  }
}

// The config's tensors against the graph's: by name, datatypes equal.
Status MatchSpec(const ModelSpec& spec, const OnnxModel& m, std::vector<size_t>* input_slot,
                 std::vector<size_t>* output_index) {
  const std::string what = "ONNX model '" + spec.name + "'";
  for (const auto& in : spec.BackendInputs()) {  // the config's inputs, then its batch inputs
    auto it = std::find_if(m.inputs.begin(), m.inputs.end(), [&](const IoInfo& g) { return g.name == in.name; });
    if (it == m.inputs.end()) {
      std::string names;
      for (const auto& g : m.inputs) names += (names.empty() ? "" : ", ") + g.name;
      return Status::InvalidArgument(what + ": config input '" + in.name + "' is not a graph input (" + names + ")");
    }
    const DataType want = onnxexec::DataTypeOfOnnx(it->elem_type);
    if (it->elem_type != 0 && want != in.dtype) {
      return Status::InvalidArgument(what + ": input '" + in.name + "' is " + std::string(DataTypeToWire(in.dtype)) +
                                     " in the config but " + onnxexec::OnnxTypeName(it->elem_type) + " in the graph");
    }
    input_slot->push_back(static_cast<size_t>(it - m.inputs.begin()));
  }
  for (size_t i = 0; i < m.inputs.size(); ++i) {
    if (std::find(input_slot->begin(), input_slot->end(), i) == input_slot->end()) {
      return Status::InvalidArgument(what + ": graph input '" + m.inputs[i].name + "' is missing from the config");
    }
  }
  if (spec.outputs.empty()) {
    for (size_t i = 0; i < m.outputs.size(); ++i) output_index->push_back(i);
    return Status::OK();
  }
  for (const auto& out : spec.outputs) {
    auto it = std::find_if(m.outputs.begin(), m.outputs.end(), [&](const IoInfo& g) { return g.name == out.name; });
    if (it == m.outputs.end()) {
      return Status::InvalidArgument(what + ": config output '" + out.name + "' is not a graph output");
    }
    const DataType want = onnxexec::DataTypeOfOnnx(it->elem_type);
    if (it->elem_type != 0 && want != out.dtype) {
      return Status::InvalidArgument(what + ": output '" + out.name + "' is " + std::string(DataTypeToWire(out.dtype)) +
                                     " in the config but " + onnxexec::OnnxTypeName(it->elem_type) + " in the graph");
    }
    output_index->push_back(static_cast<size_t>(it - m.outputs.begin()));
  }
  return Status::OK();
}

TensorSpec SpecOf(const IoInfo& io, bool batched) {
  TensorSpec t;
  t.name = io.name;
  t.dtype = onnxexec::DataTypeOfOnnx(io.elem_type);
  if (!io.has_shape) {
    t.any_rank = true;
  } else {
    t.dims.assign(io.dims.begin() + (batched ? 1 : 0), io.dims.end());
  }
  return t;
}

class OnnxBackend final : public Backend {
 public:
  OnnxBackend() { aten::InstallAllocationLimit(); }

  std::string_view name() const override { return "onnxruntime"; }
  std::vector<std::string> aliases() const override { return {"onnx"}; }
  std::vector<std::string> platforms() const override { return {"onnxruntime_onnx"}; }
  std::vector<std::string> model_filenames() const override { return {"model.onnx"}; }
  bool guards_quantization() const override { return true; }

  Status AutoComplete(const std::string& version_dir, ModelSpec* spec) override {
    INFERD_ASSIGN_OR_RETURN(OnnxModel m, LoadFile(*spec, version_dir));
    for (const auto& io : m.inputs) {
      if (!io.is_tensor || onnxexec::DataTypeOfOnnx(io.elem_type) == DataType::kInvalid) {
        return Status::InvalidArgument("graph input '" + io.name +
                                       "' is not a tensor of a KServe datatype: write a config.pbtxt");
      }
    }
    // A dynamic first dimension everywhere: the batch dimension.
    bool all_dynamic = !m.inputs.empty();
    for (const auto* list : {&m.inputs, &m.outputs})
      for (const auto& io : *list) all_dynamic = all_dynamic && io.has_shape && !io.dims.empty() && io.dims[0] == -1;
    if (spec->auto_completed && spec->max_batch_size == 0 && all_dynamic) {
      spec->max_batch_size = kAutoMaxBatchSize;
      spec->batching.dynamic = true;
    }
    const bool batched = spec->max_batch_size > 0;
    if (batched && !all_dynamic) {
      return Status::InvalidArgument(
          "max_batch_size > 0 needs a dynamic first dimension on every graph input and "
          "output: write the inputs in config.pbtxt");
    }
    for (const auto& io : m.inputs) spec->inputs.push_back(SpecOf(io, batched));
    if (spec->outputs.empty())
      for (const auto& io : m.outputs)
        if (io.is_tensor && onnxexec::DataTypeOfOnnx(io.elem_type) != DataType::kInvalid)
          spec->outputs.push_back(SpecOf(io, batched));
    if (spec->platform.empty()) spec->platform = "onnxruntime_onnx";
    return Status::OK();
  }

  Result<std::unique_ptr<LoadedModel>> Load(const ModelSpec& spec, const std::string& version_dir) override {
    INFERD_ASSIGN_OR_RETURN(int64_t max_tensor_bytes, MaxTensorBytes(spec));
    INFERD_ASSIGN_OR_RETURN(OnnxModel m, LoadFile(spec, version_dir));
    std::vector<size_t> input_slot, output_index;
    INFERD_RETURN_IF_ERROR(MatchSpec(spec, m, &input_slot, &output_index));
    std::string note = "opset " + std::to_string(m.opset) + ", " + std::to_string(m.plan->num_steps()) + " steps";
    if (m.plan->num_folded() > 0) note += " (" + std::to_string(m.plan->num_folded()) + " nodes folded at load)";
    if (m.fused > 0) note += ", " + std::to_string(m.fused) + " node groups fused";
    if (!m.producer.empty()) note += ", from " + m.producer;
    return std::unique_ptr<LoadedModel>(new OnnxLoaded(spec, std::move(m), std::move(input_slot),
                                                       std::move(output_index), std::move(note), max_tensor_bytes));
  }

 private:
  // OPTIMIZE_FOR_INFERENCE "false" (as for TorchScript): no fusion, plain ATen kernels.
  // CONV_WINOGRAD "false": no Winograd convolutions (less memory; ops/dnnl_conv.h).
  // quantization "int8": MatMul, Gemm and Linear on int8 kernels (ops/int8_ops.cc; needs optimisation on).
  Result<OnnxModel> LoadFile(const ModelSpec& spec, const std::string& version_dir) const {
    bool int8 = false;
    if (auto q = spec.parameters.find("quantization"); q != spec.parameters.end()) {
      if (q->second != "int8" && q->second != "none" && !q->second.empty()) {
        return Status::InvalidArgument("parameter quantization is \"int8\" or \"none\", not \"" + q->second + "\"");
      }
      int8 = q->second == "int8";
    }
    auto it = spec.parameters.find("OPTIMIZE_FOR_INFERENCE");
    const bool optimize = it == spec.parameters.end() || (it->second != "false" && it->second != "0");
    bool winograd = true;
    if (auto w = spec.parameters.find("CONV_WINOGRAD"); w != spec.parameters.end()) {
      if (w->second != "true" && w->second != "false") {
        return Status::InvalidArgument("parameter CONV_WINOGRAD is \"true\" or \"false\", not \"" + w->second + "\"");
      }
      winograd = w->second == "true";
    }
    INFERD_ASSIGN_OR_RETURN(int64_t max_tensor_bytes, MaxTensorBytes(spec));
    aten::AllocationLimitScope limit(max_tensor_bytes);  // constant folding runs kernels
    const onnxexec::OpRegistry& ops = !optimize  ? *plain_ops_
                                      : int8     ? (winograd ? *int8_ops_ : *int8_direct_ops_)
                                      : winograd ? *ops_
                                                 : *direct_ops_;
    return onnxexec::LoadOnnxModelFile(ModelPath(spec, version_dir), ops, optimize);
  }

  std::unique_ptr<onnxexec::OpRegistry> ops_ = onnxexec::MakeOpRegistry(true);
  std::unique_ptr<onnxexec::OpRegistry> direct_ops_ = onnxexec::MakeOpRegistry(true, /*winograd=*/false);
  std::unique_ptr<onnxexec::OpRegistry> plain_ops_ = onnxexec::MakeOpRegistry(false);
  std::unique_ptr<onnxexec::OpRegistry> int8_ops_ = onnxexec::MakeOpRegistry(true, true, /*int8=*/true);
  std::unique_ptr<onnxexec::OpRegistry> int8_direct_ops_ = onnxexec::MakeOpRegistry(true, false, /*int8=*/true);
};

}  // namespace

std::unique_ptr<Backend> MakeOnnxBackend() { return std::make_unique<OnnxBackend>(); }

Status RegisterOnnxBackend(BackendRegistry* registry) { return registry->Register(MakeOnnxBackend()); }

}  // namespace inferd
