#include "repository/repository.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "repository/model_config.h"

namespace inferd {
namespace fs = std::filesystem;

uint64_t DirectoryBytes(const std::string& dir) {
  uint64_t total = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->is_regular_file(ec)) total += it->file_size(ec);
  }
  return total;
}

namespace {
bool IsValidModelName(const std::string& n) {
  if (n.empty() || n[0] == '.') return false;
  for (char c : n)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.')) return false;
  return true;
}
}  // namespace

std::string ModelRepository::ModelDir(const std::string& name) const { return (fs::path(root_) / name).string(); }

bool ModelRepository::HasModel(const std::string& name) const {
  std::error_code ec;
  return IsValidModelName(name) && fs::is_directory(fs::path(root_) / name, ec);
}

Result<std::vector<std::string>> ModelRepository::ListModels() const {
  std::error_code ec;
  fs::directory_iterator it(root_, ec);
  if (ec) return Status::NotFound("cannot read model repository '" + root_ + "': " + ec.message());
  std::vector<std::string> names;
  for (const auto& e : it) {
    if (!e.is_directory(ec)) continue;
    std::string n = e.path().filename().string();
    if (IsValidModelName(n)) names.push_back(std::move(n));
  }
  std::sort(names.begin(), names.end());
  return names;
}

Result<ModelSource> ModelRepository::ReadModel(const std::string& name,
                                               const std::optional<std::string>& override_text) const {
  if (!IsValidModelName(name)) return Status::InvalidArgument("invalid model name '" + name + "'");
  ModelSource src;
  src.name = name;
  src.dir = ModelDir(name);
  src.config_path = (fs::path(src.dir) / "config.pbtxt").string();
  std::error_code ec;
  if (!fs::is_directory(src.dir, ec)) {
    return Status::NotFound("model '" + name + "' is not in the repository '" + root_ + "'");
  }
  std::string source = src.config_path;
  if (override_text) {
    src.config_text = *override_text;
    src.has_config = true;
    source = "load request config for '" + name + "'";
  } else if (fs::exists(src.config_path, ec)) {
    std::ifstream f(src.config_path, std::ios::binary);
    if (!f) return Status::InvalidArgument("cannot read " + src.config_path);
    std::stringstream ss;
    ss << f.rdbuf();
    src.config_text = ss.str();
    src.has_config = true;
  }
  INFERD_ASSIGN_OR_RETURN(src.spec, ParseModelConfig(src.config_text, name, source));
  src.spec.auto_completed = !src.has_config;

  for (const auto& e : fs::directory_iterator(src.dir, ec)) {
    if (!e.is_directory(ec)) continue;
    const std::string v = e.path().filename().string();
    if (v.empty() || v[0] == '0') continue;
    int64_t num = 0;
    auto [p, err] = std::from_chars(v.data(), v.data() + v.size(), num);
    if (err != std::errc() || p != v.data() + v.size() || num < 1) continue;
    src.available_versions.push_back(num);
  }
  std::sort(src.available_versions.begin(), src.available_versions.end());
  return src;
}

std::vector<int64_t> ModelRepository::SelectVersions(const VersionPolicySpec& policy,
                                                     const std::vector<int64_t>& available) {
  switch (policy.kind) {
    case VersionPolicySpec::Kind::kAll:
      return available;
    case VersionPolicySpec::Kind::kSpecific: {
      std::vector<int64_t> out;
      for (int64_t v : available)
        if (std::find(policy.versions.begin(), policy.versions.end(), v) != policy.versions.end()) out.push_back(v);
      return out;
    }
    case VersionPolicySpec::Kind::kLatest:
      break;
  }
  const size_t n = std::min<size_t>(policy.latest_n, available.size());
  return std::vector<int64_t>(available.end() - static_cast<std::ptrdiff_t>(n), available.end());
}

}  // namespace inferd
