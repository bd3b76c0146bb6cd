#include "backends/identity/identity_backend.h"

namespace inferd {
namespace {

class IdentityInstance final : public ModelInstance {
 public:
  explicit IdentityInstance(const ModelSpec& spec) : spec_(spec) {}
  Result<std::vector<Tensor>> Execute(const std::vector<Tensor>& inputs) override {
    std::vector<Tensor> out;
    for (size_t i = 0; i < inputs.size() && i < spec_.outputs.size(); ++i) {
      Tensor t = inputs[i];
      t.name = spec_.outputs[i].name;
      out.push_back(std::move(t));
    }
    return out;
  }

 private:
  const ModelSpec& spec_;
};

class IdentityModel final : public LoadedModel {
 public:
  explicit IdentityModel(ModelSpec spec) : spec_(std::move(spec)) {}
  Result<std::unique_ptr<ModelInstance>> CreateInstance(int) override {
    return std::unique_ptr<ModelInstance>(new IdentityInstance(spec_));
  }

 private:
  ModelSpec spec_;
};

class IdentityBackend final : public Backend {
 public:
  std::string_view name() const override { return "identity"; }
  Status AutoComplete(const std::string&, ModelSpec*) override {
    return Status::InvalidArgument("the identity backend needs a config.pbtxt with inputs");
  }
  Result<std::unique_ptr<LoadedModel>> Load(const ModelSpec& spec, const std::string&) override {
    if (spec.outputs.size() != spec.inputs.size()) {
      return Status::InvalidArgument("identity model '" + spec.name + "' needs as many outputs as inputs");
    }
    for (size_t i = 0; i < spec.inputs.size(); ++i) {
      if (spec.inputs[i].dtype != spec.outputs[i].dtype) {
        return Status::InvalidArgument("identity model '" + spec.name + "': output '" + spec.outputs[i].name +
                                       "' must have the datatype of input '" + spec.inputs[i].name + "'");
      }
    }
    return std::unique_ptr<LoadedModel>(new IdentityModel(spec));
  }
};

}  // namespace

std::unique_ptr<Backend> MakeIdentityBackend() { return std::make_unique<IdentityBackend>(); }

Status RegisterIdentityBackend(BackendRegistry* registry) { return registry->Register(MakeIdentityBackend()); }

}  // namespace inferd
