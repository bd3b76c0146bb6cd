#include "backends/backend.h"

namespace inferd {

std::vector<Result<std::vector<Tensor>>> ModelInstance::ExecuteRequests(
    const std::vector<const InferRequest*>& requests, const std::vector<PartialSender>&) {
  std::vector<Result<std::vector<Tensor>>> results;
  for (const InferRequest* r : requests) results.push_back(Execute(r->inputs));
  return results;
}

namespace {
constexpr std::string_view kDefaultBackend = "pytorch";
}  // namespace

Status BackendRegistry::Register(std::unique_ptr<Backend> backend) {
  const std::string name(backend->name());
  if (backend->interface_version() != kBackendInterfaceVersion) {
    return Status::FailedPrecondition("backend '" + name + "' was built for backend interface version " +
                                      std::to_string(backend->interface_version()) + "; this server has version " +
                                      std::to_string(kBackendInterfaceVersion));
  }
  std::vector<std::string> names = backend->aliases();
  names.insert(names.begin(), name);
  for (const auto& n : names)
    if (by_alias_.count(n)) return Status::AlreadyExists("backend name '" + n + "' is registered twice");
  for (const auto& p : backend->platforms())
    if (by_platform_.count(p)) return Status::AlreadyExists("platform '" + p + "' is registered by two backends");
  Backend* b = backend.get();
  for (const auto& n : names) by_alias_[n] = b;
  for (const auto& p : b->platforms()) by_platform_[p] = b;
  backends_[name] = std::move(backend);
  return Status::OK();
}

Backend* BackendRegistry::Find(std::string_view name) const {
  auto it = by_alias_.find(name);
  return it == by_alias_.end() ? nullptr : it->second;
}

Result<Backend*> BackendRegistry::Resolve(std::string_view backend, std::string_view platform,
                                          const std::vector<std::string>& files) const {
  if (!backend.empty()) {
    if (Backend* b = Find(backend)) return b;
    return Status::NotFound("unknown backend '" + std::string(backend) + "' (available: " + Describe() + ")");
  }
  if (!platform.empty()) {
    auto it = by_platform_.find(platform);
    if (it != by_platform_.end()) return it->second;
    return Status::NotFound("unknown platform '" + std::string(platform) + "' (available: " + Describe() + ")");
  }
  for (const auto& f : files)
    for (const auto& [name, b] : backends_)
      for (const auto& known : b->model_filenames())
        if (known == f) return b.get();
  if (Backend* b = Find(kDefaultBackend)) return b;
  return Status::NotFound("the config names no backend or platform and this build has no default '" +
                          std::string(kDefaultBackend) + "' backend (available: " + Describe() + ")");
}

Result<Backend*> BackendRegistry::ResolveSpec(ModelSpec* spec, const std::vector<std::string>& files) const {
  auto b = Resolve(spec->backend, spec->platform, files);
  if (!b.ok()) {
    return b.status().WithPrefix(std::string("field '") + (spec->backend.empty() ? "platform" : "backend") + "'");
  }
  spec->backend = std::string((*b)->name());
  spec->scheduler_kind = std::string((*b)->scheduler_kind());
  if (spec->platform.empty()) {
    const auto platforms = (*b)->platforms();
    if (!platforms.empty()) spec->platform = platforms.front();
  }
  return b;
}

std::vector<std::string> BackendRegistry::Names() const {
  std::vector<std::string> out;
  for (const auto& [k, v] : backends_) out.push_back(k);
  return out;
}

std::string BackendRegistry::Describe() const {
  std::string out;
  for (const auto& [name, b] : backends_) {
    if (!out.empty()) out += ", ";
    out += name;
    const auto platforms = b->platforms();
    if (platforms.empty()) continue;
    out += " (platforms: ";
    for (size_t i = 0; i < platforms.size(); ++i) out += (i ? ", " : "") + platforms[i];
    out += ")";
  }
  return out.empty() ? "none" : out;
}

}  // namespace inferd
