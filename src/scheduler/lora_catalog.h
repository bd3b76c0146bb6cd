// LoraCatalog: the LoRA adapters the server knows, by name: the base model
// each one adapts and the folder it is read from (PEFT's format,
// llm/lora_adapter.h). Filled from the repository (a model folder's
// loras/<name>/ subfolders) and by the load API (/v1/load_lora_adapter);
// read by the request path (a request naming an adapter as its model goes to
// the adapter's base model) and by the generative schedulers (where an
// adapter's files are).
//
// An adapter name follows a model name's rules and is unique in the server
// (vLLM's convention: an adapter is a model id of its own).
//
// Thread-safety: thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/mutex.h"
#include "core/status.h"

namespace inferd {

struct LoraEntry {
  std::string name;
  std::string base_model;
  std::string path;              // the adapter's folder
  bool from_repository = false;  // else from the load API
  // Unique per registration (never 0): an adapter unloaded and loaded again
  // under its name is a new one for caches and prefix-cache keys.
  uint64_t id = 0;
};

class LoraCatalog {
 public:
  // INVALID_ARGUMENT for a name that is empty, longer than 128 bytes or has
  // characters other than letters, digits and "._-:".
  static Status CheckName(std::string_view name);

  // Registers `entry` (its id is assigned). ALREADY_EXISTS when the name is
  // taken by an adapter of the load API, or by the repository's adapter of
  // another base model.
  Result<LoraEntry> Add(LoraEntry entry);
  // NOT_FOUND when no adapter has the name.
  Status Remove(std::string_view name);
  std::optional<LoraEntry> Find(std::string_view name) const;
  // No adapter at all: the request path's check before it looks a name up (lock-free).
  bool empty() const { return size_.load(std::memory_order_acquire) == 0; }
  // Every adapter, by name; of one base model when `base` is given.
  std::vector<LoraEntry> List(std::optional<std::string_view> base = std::nullopt) const;
  // The repository's adapters of `base` as they are now: those it no longer
  // has are removed, new ones added, unchanged ones (same folder) kept with
  // their id. An adapter of the load API keeps its name (the repository's
  // adapter of that name is skipped and returned). Returns the names skipped.
  std::vector<std::string> SetRepositoryAdapters(const std::string& base, std::vector<LoraEntry> entries);

 private:
  mutable Mutex mu_;
  std::map<std::string, LoraEntry, std::less<>> entries_ TSA_GUARDED_BY(mu_);
  uint64_t next_id_ TSA_GUARDED_BY(mu_) = 1;
  std::atomic<size_t> size_{0};  // entries_.size(), set under mu_
};

}  // namespace inferd
