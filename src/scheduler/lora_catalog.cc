#include "scheduler/lora_catalog.h"

#include <set>

namespace inferd {

Status LoraCatalog::CheckName(std::string_view name) {
  if (name.empty() || name.size() > 128) {
    return Status::InvalidArgument("a LoRA adapter's name must have 1 to 128 characters");
  }
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '_' || c == '-' || c == ':';
    if (!ok) {
      return Status::InvalidArgument("LoRA adapter name '" + std::string(name.substr(0, 64)) +
                                     "' has a character other than letters, digits and . _ - :");
    }
  }
  if (name == "." || name == "..") return Status::InvalidArgument("a LoRA adapter cannot be named . or ..");
  return Status::OK();
}

Result<LoraEntry> LoraCatalog::Add(LoraEntry entry) {
  INFERD_RETURN_IF_ERROR(CheckName(entry.name));
  MutexLock l(&mu_);
  auto it = entries_.find(entry.name);
  if (it != entries_.end()) {
    return Status::AlreadyExists("The lora adapter '" + entry.name + "' has already been loaded (an adapter of '" +
                                 it->second.base_model + "' from " + it->second.path + ")");
  }
  entry.id = next_id_++;
  entries_[entry.name] = entry;
  size_.store(entries_.size(), std::memory_order_release);
  return entry;
}

Status LoraCatalog::Remove(std::string_view name) {
  MutexLock l(&mu_);
  auto it = entries_.find(name);
  if (it == entries_.end()) {
    return Status::NotFound("The lora adapter '" + std::string(name.substr(0, 128)) + "' cannot be found.");
  }
  entries_.erase(it);
  size_.store(entries_.size(), std::memory_order_release);
  return Status::OK();
}

std::optional<LoraEntry> LoraCatalog::Find(std::string_view name) const {
  MutexLock l(&mu_);
  auto it = entries_.find(name);
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

std::vector<LoraEntry> LoraCatalog::List(std::optional<std::string_view> base) const {
  MutexLock l(&mu_);
  std::vector<LoraEntry> out;
  for (const auto& [name, e] : entries_) {
    if (!base || e.base_model == *base) out.push_back(e);
  }
  return out;
}

std::vector<std::string> LoraCatalog::SetRepositoryAdapters(const std::string& base, std::vector<LoraEntry> entries) {
  std::vector<std::string> skipped;
  MutexLock l(&mu_);
  std::set<std::string, std::less<>> now;
  for (const LoraEntry& e : entries) now.insert(e.name);
  for (auto it = entries_.begin(); it != entries_.end();) {
    const LoraEntry& e = it->second;
    if (e.from_repository && e.base_model == base && !now.count(e.name)) {
      it = entries_.erase(it);
    } else {
      ++it;
    }
  }
  for (LoraEntry& e : entries) {
    if (!CheckName(e.name).ok()) {
      skipped.push_back(e.name);
      continue;
    }
    auto it = entries_.find(e.name);
    if (it != entries_.end()) {
      const LoraEntry& old = it->second;
      if (old.from_repository && old.base_model == base && old.path == e.path) continue;  // unchanged
      if (!old.from_repository || old.base_model != base) {
        skipped.push_back(e.name);
        continue;
      }
    }
    e.base_model = base;
    e.from_repository = true;
    e.id = next_id_++;
    entries_[e.name] = std::move(e);
  }
  size_.store(entries_.size(), std::memory_order_release);
  return skipped;
}

}  // namespace inferd
