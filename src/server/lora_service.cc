#include "server/lora_service.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "llm/decoder_config.h"
#include "llm/lora_adapter.h"
#include "repository/repository.h"

namespace inferd {
namespace {

constexpr const char* kLorasFolder = "loras";

bool IsGenerative(const ModelRepository& repo, const ModelSource& src) {
  const std::string& b = src.spec.backend;
  if (b == "llm" || b == "transformers" || src.spec.platform == "llm_decoder") return true;
  if (!b.empty() || !src.spec.platform.empty()) return false;
  const auto files = repo.NewestVersionFiles(src);
  return std::find(files.begin(), files.end(), "model.safetensors") != files.end() ||
         std::find(files.begin(), files.end(), "model.safetensors.index.json") != files.end();
}

}  // namespace

Result<std::string> LoraService::GenerativeBase(std::string base) const {
  if (!base.empty()) {
    if (!repository_->HasModel(base)) return Status::NotFound("The model `" + base + "` does not exist.");
    return base;
  }
  INFERD_ASSIGN_OR_RETURN(std::vector<std::string> names, repository_->ListModels());
  std::vector<std::string> generative;
  for (const std::string& n : names) {
    auto src = repository_->ReadModel(n);
    if (src.ok() && IsGenerative(*repository_, *src)) generative.push_back(n);
  }
  if (generative.size() == 1) return generative[0];
  if (generative.empty()) return Status::NotFound("the repository has no generative model for a LoRA adapter");
  return Status::InvalidArgument("the repository has " + std::to_string(generative.size()) +
                                 " generative models; name the adapter's base model in \"base_model_name\"");
}

Result<LoraEntry> LoraService::Load(const std::string& name, const std::string& path, std::string base) {
  INFERD_RETURN_IF_ERROR(LoraCatalog::CheckName(name));
  if (path.empty()) return Status::InvalidArgument("\"lora_path\" must name the adapter's folder");
  if (repository_->HasModel(name)) {
    return Status::AlreadyExists("'" + name + "' is a model's name; a LoRA adapter needs a name of its own");
  }
  if (catalog_->Find(name)) {
    return Status::AlreadyExists("The lora adapter '" + name + "' has already been loaded.");
  }
  INFERD_ASSIGN_OR_RETURN(base, GenerativeBase(std::move(base)));
  INFERD_ASSIGN_OR_RETURN(ModelSource src, repository_->ReadModel(base));
  if (!IsGenerative(*repository_, src)) {
    return Status::InvalidArgument("model '" + base + "' is not a generative (llm) model");
  }
  if (src.available_versions.empty()) return Status::NotFound("model '" + base + "' has no version");
  const std::string dir = repository_->VersionDir(base, src.available_versions.back());
  INFERD_ASSIGN_OR_RETURN(std::string config_text, repository_->fs().ReadFile(dir + "/config.json"));
  INFERD_ASSIGN_OR_RETURN(llm::DecoderConfig config, llm::ParseDecoderConfig(config_text));
  if (config.architecture != llm::Architecture::kLlama) {
    return Status::InvalidArgument("model '" + base + "' is not a Llama-architecture model; LoRA adapters need one");
  }
  llm::LoraLimits limits;
  if (auto it = src.spec.parameters.find("max_lora_rank"); it != src.spec.parameters.end()) {
    limits.max_rank = std::clamp(std::atoi(it->second.c_str()), 1, 1024);
  }
  // The whole adapter is read and checked now, so a bad one fails its load here, naming why.
  auto adapter = llm::LoadLoraAdapter(path, config, limits);
  if (!adapter.ok()) {
    const Status& st = adapter.status();
    return Status(st.code() == StatusCode::kNotFound ? StatusCode::kNotFound : StatusCode::kInvalidArgument,
                  "LoRA adapter '" + name + "' cannot be loaded: " + st.message());
  }
  INFERD_ASSIGN_OR_RETURN(LoraEntry e, catalog_->Add(LoraEntry{name, base, path, false}));
  spdlog::info("LoRA adapter {} of model {} from {} (rank {}, {} bytes)", name, base, path, (*adapter)->config.rank,
               (*adapter)->bytes());
  return e;
}

Status LoraService::Unload(const std::string& name) { return catalog_->Remove(name); }

void LoraService::ScanModel(const std::string& model) {
  const std::string dir = repository_->ModelDir(model) + "/" + kLorasFolder;
  std::vector<LoraEntry> found;
  if (repository_->fs().IsDirectory(dir)) {
    auto entries = repository_->fs().List(dir);
    if (entries.ok()) {
      for (const auto& e : *entries) {
        const std::string path = dir + "/" + e.name;
        if (!e.directory || !repository_->fs().IsFile(path + "/adapter_config.json")) continue;
        auto local = repository_->fs().LocalPath(path);
        if (!local.ok()) continue;
        found.push_back(LoraEntry{e.name, model, *local, true});
      }
    }
  }
  for (const std::string& skipped : catalog_->SetRepositoryAdapters(model, std::move(found))) {
    if (repository_->HasModel(skipped)) continue;
    spdlog::warn("LoRA adapter {} in {} skipped: its name is taken or not a valid name", skipped, dir);
  }
}

void LoraService::ScanRepository() {
  auto names = repository_->ListModels();
  if (!names.ok()) return;
  for (const std::string& n : *names) ScanModel(n);
}

}  // namespace inferd
