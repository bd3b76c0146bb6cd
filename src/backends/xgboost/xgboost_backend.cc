#include "backends/xgboost/xgboost_backend.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "backends/xgboost/tree_model.h"

namespace inferd {
namespace {

using xgboost::Dialect;
using xgboost::TreeModel;
using xgboost::XgbConfig;

// Models without a config.pbtxt batch up to this many rows per execution
// (dynamic batching on): trees predict row by row, so larger batches only
// amortise the call.
constexpr int kAutoMaxBatchSize = 256;

Result<std::string> FindModelFile(const XgbConfig& config, const std::string& version_dir) {
  std::error_code ec;
  for (const auto& f : config.files) {
    const auto path = std::filesystem::path(version_dir) / f;
    if (std::filesystem::is_regular_file(path, ec)) return path.string();
  }
  std::string names;
  for (const auto& f : config.files) names += (names.empty() ? "" : ", ") + f;
  return Status::NotFound("no model file in " + version_dir + " (looked for " + names + ")");
}

Result<std::string> ReadWhole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound("cannot open '" + path + "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return Status::Internal("cannot read '" + path + "'");
  return std::move(ss).str();
}

struct Loaded {
  std::unique_ptr<TreeModel> model;
  std::string file;
  std::string log;
};

Result<Loaded> LoadTree(const XgbConfig& config, const std::string& version_dir) {
  Loaded l;
  INFERD_ASSIGN_OR_RETURN(l.file, FindModelFile(config, version_dir));
  INFERD_ASSIGN_OR_RETURN(std::string bytes, ReadWhole(l.file));
  xgboost::LogCapture capture;
  auto model = TreeModel::Load(bytes, config);
  if (!model.ok()) return model.status().WithPrefix(l.file);
  l.model = std::move(*model);
  l.log = capture.text();
  return l;
}

class TreeInstance final : public ModelInstance {
 public:
  TreeInstance(std::unique_ptr<TreeModel> model, std::string output_name)
      : model_(std::move(model)), output_name_(std::move(output_name)) {}

  Result<std::vector<Tensor>> Execute(const std::vector<Tensor>& inputs) override {
    if (inputs.size() != 1) return Status::InvalidArgument("an XGBoost model takes one input tensor");
    const Tensor& in = inputs[0];
    if (in.dtype != DataType::kFp32) return Status::InvalidArgument("XGBoost models take FP32 input");
    const int64_t features = model_->num_features();
    if (in.shape.empty() || in.shape.back() != features) {
      return Status::InvalidArgument("input '" + in.name + "' has shape " + ShapeToString(in.shape) +
                                     "; the model takes " + std::to_string(features) +
                                     " features in the last dimension");
    }
    const int64_t rows = in.element_count() / features;
    // [..., features] in, [..., width] out.
    Shape shape(in.shape.begin(), in.shape.end() - 1);
    shape.push_back(model_->row_width());
    std::byte* out = nullptr;
    const size_t bytes = static_cast<size_t>(rows * model_->row_width()) * sizeof(float);
    Tensor t = Tensor::Allocate(output_name_, DataType::kFp32, std::move(shape), bytes, &out);
    // Tensors may view a request body at any offset; the library needs
    // float alignment.
    const float* x = in.as<float>();
    if (reinterpret_cast<uintptr_t>(in.data) % alignof(float) != 0) {
      aligned_.resize(static_cast<size_t>(in.element_count()));
      std::memcpy(aligned_.data(), in.data, aligned_.size() * sizeof(float));
      x = aligned_.data();
    }
    INFERD_RETURN_IF_ERROR(model_->Predict(x, rows, reinterpret_cast<float*>(out)));
    std::vector<Tensor> result;
    result.push_back(std::move(t));
    return result;
  }

 private:
  std::unique_ptr<TreeModel> model_;
  std::string output_name_;
  std::vector<float> aligned_;  // scratch for misaligned inputs
};

class TreeLoadedModel final : public LoadedModel {
 public:
  TreeLoadedModel(std::vector<std::unique_ptr<TreeModel>> boosters, std::string output_name, std::string note)
      : boosters_(std::move(boosters)), output_name_(std::move(output_name)), note_(std::move(note)) {}

  Result<std::unique_ptr<ModelInstance>> CreateInstance(int index) override {
    if (index < 0 || static_cast<size_t>(index) >= boosters_.size() || !boosters_[index]) {
      return Status::Internal("XGBoost model instance " + std::to_string(index) + " was not prepared");
    }
    return std::unique_ptr<ModelInstance>(new TreeInstance(std::move(boosters_[index]), output_name_));
  }
  std::string LoadNote() const override { return note_; }

 private:
  std::vector<std::unique_ptr<TreeModel>> boosters_;  // one per instance, handed over by CreateInstance
  std::string output_name_;
  std::string note_;
};

// The spec's input and output against the model: one FP32 input whose last
// dimension is the feature count, one FP32 output whose last is the width.
Status CheckSpec(const ModelSpec& spec, const TreeModel& m) {
  const std::string what = "XGBoost model '" + spec.name + "'";
  if (spec.inputs.size() != 1) return Status::InvalidArgument(what + " takes exactly one input");
  const TensorSpec& in = spec.inputs[0];
  if (in.dtype != DataType::kFp32) {
    return Status::InvalidArgument(what + ": input '" + in.name + "' must be TYPE_FP32, not " +
                                   std::string(DataTypeToWire(in.dtype)));
  }
  const Shape& dims = in.reshape ? *in.reshape : in.dims;
  if (!in.any_rank && (dims.empty() || (dims.back() != -1 && dims.back() != m.num_features()))) {
    return Status::InvalidArgument(what + ": input '" + in.name + "' dims " + ShapeToString(dims) +
                                   " do not end in the model's " + std::to_string(m.num_features()) + " features");
  }
  if (spec.outputs.size() > 1) return Status::InvalidArgument(what + " has exactly one output");
  if (spec.outputs.size() == 1) {
    const TensorSpec& out = spec.outputs[0];
    if (out.dtype != DataType::kFp32) {
      return Status::InvalidArgument(what + ": output '" + out.name + "' must be TYPE_FP32, not " +
                                     std::string(DataTypeToWire(out.dtype)));
    }
    if (!out.any_rank && !out.dims.empty() && out.dims.back() != -1 && out.dims.back() != m.row_width()) {
      return Status::InvalidArgument(what + ": output '" + out.name + "' dims " + ShapeToString(out.dims) +
                                     " but the model answers " + std::to_string(m.row_width()) + " value(s) per row");
    }
  }
  return Status::OK();
}

class XgboostBackend final : public Backend {
 public:
  explicit XgboostBackend(Dialect dialect) : dialect_(dialect) {}

  std::string_view name() const override { return dialect_ == Dialect::kFil ? "fil" : "xgboost"; }
  std::vector<std::string> model_filenames() const override {
    if (dialect_ == Dialect::kFil) return {};
    return {"model.json", "model.ubj", "model.bst"};
  }

  Status AutoComplete(const std::string& version_dir, ModelSpec* spec) override {
    INFERD_ASSIGN_OR_RETURN(XgbConfig config, xgboost::ParseXgbConfig(*spec, dialect_));
    INFERD_ASSIGN_OR_RETURN(Loaded l, LoadTree(config, version_dir));
    if (spec->auto_completed && spec->max_batch_size == 0) {
      spec->max_batch_size = kAutoMaxBatchSize;
      spec->batching.dynamic = true;
    }
    TensorSpec in;
    in.name = "input__0";
    in.dtype = DataType::kFp32;
    in.dims = {l.model->num_features()};
    if (spec->max_batch_size == 0) in.dims.insert(in.dims.begin(), -1);
    spec->inputs.push_back(std::move(in));
    if (spec->outputs.empty()) {
      TensorSpec out;
      out.name = "output__0";
      out.dtype = DataType::kFp32;
      out.dims = {l.model->row_width()};
      if (spec->max_batch_size == 0) out.dims.insert(out.dims.begin(), -1);
      spec->outputs.push_back(std::move(out));
    }
    return Status::OK();
  }

  Result<std::unique_ptr<LoadedModel>> Load(const ModelSpec& spec, const std::string& version_dir) override {
    INFERD_ASSIGN_OR_RETURN(XgbConfig config, xgboost::ParseXgbConfig(spec, dialect_));
    std::vector<std::unique_ptr<TreeModel>> boosters;
    std::string note;
    for (int i = 0; i < std::max(1, spec.instance_count); ++i) {
      INFERD_ASSIGN_OR_RETURN(Loaded l, LoadTree(config, version_dir));
      if (i == 0) {
        INFERD_RETURN_IF_ERROR(CheckSpec(spec, *l.model));
        const auto& f = l.model->facts();
        note = std::filesystem::path(l.file).filename().string() + ": " + f.booster + ", " +
               std::to_string(f.num_trees) + " trees, " + std::to_string(f.num_feature) + " features, objective " +
               f.objective + ", " + std::to_string(config.threads) + " thread(s)";
        if (!l.log.empty()) note += "; xgboost said: " + l.log;
      }
      boosters.push_back(std::move(l.model));
    }
    const std::string output = spec.outputs.empty() ? "output__0" : spec.outputs[0].name;
    return std::unique_ptr<LoadedModel>(new TreeLoadedModel(std::move(boosters), output, std::move(note)));
  }

 private:
  Dialect dialect_;
};

}  // namespace

std::unique_ptr<Backend> MakeXgboostBackend() { return std::make_unique<XgboostBackend>(Dialect::kXgboost); }
std::unique_ptr<Backend> MakeFilBackend() { return std::make_unique<XgboostBackend>(Dialect::kFil); }

Status RegisterXgboostBackends(BackendRegistry* registry) {
  INFERD_RETURN_IF_ERROR(registry->Register(MakeXgboostBackend()));
  return registry->Register(MakeFilBackend());
}

}  // namespace inferd
