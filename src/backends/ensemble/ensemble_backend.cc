#include "backends/ensemble/ensemble_backend.h"

namespace inferd {
namespace {

class EnsembleInstance final : public ModelInstance {
 public:
  Result<std::vector<Tensor>> Execute(const std::vector<Tensor>&) override {
    return Status::Internal("an ensemble runs its steps on their own models, never on an instance");
  }
};

class EnsembleModel final : public LoadedModel {
 public:
  Result<std::unique_ptr<ModelInstance>> CreateInstance(int) override {
    return std::unique_ptr<ModelInstance>(new EnsembleInstance());
  }
  std::string LoadNote() const override { return note_; }
  explicit EnsembleModel(std::string note) : note_(std::move(note)) {}

 private:
  std::string note_;
};

class EnsembleBackend final : public Backend {
 public:
  std::string_view name() const override { return "ensemble"; }
  std::vector<std::string> platforms() const override { return {"ensemble"}; }
  Status AutoComplete(const std::string&, ModelSpec*) override {
    return Status::InvalidArgument("an ensemble's config.pbtxt lists its inputs and outputs");
  }
  Result<std::unique_ptr<LoadedModel>> Load(const ModelSpec& spec, const std::string&) override {
    if (!spec.ensemble) return Status::InvalidArgument("platform \"ensemble\" needs ensemble_scheduling");
    return std::unique_ptr<LoadedModel>(new EnsembleModel(std::to_string(spec.ensemble->steps.size()) + " steps"));
  }
};

}  // namespace

std::unique_ptr<Backend> MakeEnsembleBackend() { return std::make_unique<EnsembleBackend>(); }

Status RegisterEnsembleBackend(BackendRegistry* registry) { return registry->Register(MakeEnsembleBackend()); }

}  // namespace inferd
