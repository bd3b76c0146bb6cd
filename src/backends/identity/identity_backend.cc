#include "backends/identity/identity_backend.h"

#include "backends/echo.h"

namespace inferd {
namespace {

class IdentityInstance final : public ModelInstance {
 public:
  explicit IdentityInstance(const ModelSpec& spec) : spec_(spec) {}
  Result<std::vector<Tensor>> Execute(const std::vector<Tensor>& inputs) override { return EchoInputs(spec_, inputs); }

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
    INFERD_RETURN_IF_ERROR(CheckEchoSpec(spec, "identity model '" + spec.name + "'"));
    return std::unique_ptr<LoadedModel>(new IdentityModel(spec));
  }
};

}  // namespace

std::unique_ptr<Backend> MakeIdentityBackend() { return std::make_unique<IdentityBackend>(); }

Status RegisterIdentityBackend(BackendRegistry* registry) { return registry->Register(MakeIdentityBackend()); }

}  // namespace inferd
