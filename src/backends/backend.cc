#include "backends/backend.h"

namespace inferd {

void BackendRegistry::Register(std::unique_ptr<Backend> backend) {
  std::string n(backend->name());
  backends_[n] = std::move(backend);
}

Backend* BackendRegistry::Find(std::string_view name) const {
  auto it = backends_.find(name);
  return it == backends_.end() ? nullptr : it->second.get();
}

std::vector<std::string> BackendRegistry::Names() const {
  std::vector<std::string> out;
  for (const auto& [k, v] : backends_) out.push_back(k);
  return out;
}

}  // namespace inferd
