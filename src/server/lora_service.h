// LoraService: the LoRA adapters of the server's generative models, for the
// admin routes and the request path (docs/generative.md, "LoRA adapters").
//
// Where adapters come from:
// - the repository: each subfolder of a model folder's loras/ holding
//   adapter_config.json is an adapter of that model, named after the
//   subfolder (<repository>/<model>/loras/<name>/). Read at start-up, on
//   every repository poll, and when the model is loaded through the
//   repository API;
// - the load API (vLLM's POST /v1/load_lora_adapter {lora_name, lora_path}):
//   checked against its base model's config.json (its rank, shapes and
//   target modules) before it is registered.
// Once registered, an adapter is a model id of its own (a request naming it
// goes to its base model with the adapter); its weights are read into host
// memory on its first request (scheduler/lora_cache.h).
//
// Thread-safety: thread-safe. Ownership: the parts are not owned.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "scheduler/lora_catalog.h"

namespace inferd {

class ModelRepository;

class LoraService {
 public:
  LoraService(LoraCatalog* catalog, const ModelRepository* repository) : catalog_(catalog), repository_(repository) {}

  // Registers the adapter in folder `path` as `name`, adapting `base` (empty:
  // the repository's one generative model). INVALID_ARGUMENT for a bad name
  // or adapter (the reason), NOT_FOUND for an unknown base model or folder,
  // ALREADY_EXISTS for a name in use (an adapter's or a model's).
  Result<LoraEntry> Load(const std::string& name, const std::string& path, std::string base);
  // NOT_FOUND when no adapter has the name. An adapter of the repository
  // comes back at its next scan unless its folder is gone.
  Status Unload(const std::string& name);
  std::vector<LoraEntry> List() const { return catalog_->List(); }

  // Re-reads the loras/ folder of one model, or of every model.
  void ScanModel(const std::string& model);
  void ScanRepository();

  const LoraCatalog& catalog() const { return *catalog_; }

 private:
  Result<std::string> GenerativeBase(std::string base) const;

  LoraCatalog* catalog_;
  const ModelRepository* repository_;
};

}  // namespace inferd
