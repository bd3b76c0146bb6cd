#include "repository/repository.h"

#include <algorithm>
#include <charconv>
#include <memory>
#include <string_view>

#include "repository/model_config.h"

namespace inferd {

namespace {
bool IsValidModelName(const std::string& n) {
  if (n.empty() || n[0] == '.') return false;
  for (char c : n)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.')) return false;
  return true;
}

// One label per line (Triton's label files); a final newline ends the last
// line, a "\r" before a newline is dropped.
std::vector<std::string> SplitLabels(std::string_view text) {
  std::vector<std::string> labels;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    labels.emplace_back(line);
    start = end + 1;
  }
  return labels;
}

}  // namespace

std::string ModelRepository::ModelDir(const std::string& name) const { return JoinPath(root_, name); }

std::string ModelRepository::VersionDir(const std::string& name, int64_t version) const {
  return JoinPath(ModelDir(name), std::to_string(version));
}

bool ModelRepository::HasModel(const std::string& name) const {
  return IsValidModelName(name) && fs_->IsDirectory(ModelDir(name));
}

Result<std::vector<std::string>> ModelRepository::ListModels() const {
  auto entries = fs_->List(root_);
  if (!entries.ok())
    return Status::NotFound("cannot read model repository '" + root_ + "': " + entries.status().message());
  std::vector<std::string> names;
  for (auto& e : *entries)
    if (e.directory && IsValidModelName(e.name)) names.push_back(std::move(e.name));
  return names;
}

Result<ModelSource> ModelRepository::ReadModel(const std::string& name,
                                               const std::optional<std::string>& override_text) const {
  if (!IsValidModelName(name)) return Status::InvalidArgument("invalid model name '" + name + "'");
  ModelSource src;
  src.name = name;
  src.dir = ModelDir(name);
  src.config_path = JoinPath(src.dir, "config.pbtxt");
  if (!fs_->IsDirectory(src.dir)) {
    return Status::NotFound("model '" + name + "' is not in the repository '" + root_ + "'");
  }
  std::string source = src.config_path;
  if (override_text) {
    src.config_text = *override_text;
    src.has_config = true;
    source = "load request config for '" + name + "'";
  } else if (fs_->IsFile(src.config_path)) {
    auto text = fs_->ReadFile(src.config_path);
    if (!text.ok()) return Status::InvalidArgument("cannot read " + src.config_path + ": " + text.status().message());
    src.config_text = std::move(*text);
    src.has_config = true;
  }
  INFERD_ASSIGN_OR_RETURN(src.spec, ParseModelConfig(src.config_text, name, source));
  src.spec.auto_completed = !src.has_config;
  for (TensorSpec& out : src.spec.outputs) {
    if (out.label_filename.empty()) continue;
    const std::string path = JoinPath(src.dir, out.label_filename);
    auto text = fs_->ReadFile(path);
    if (!text.ok()) {
      return Status::InvalidArgument(source + ": cannot read label file '" + out.label_filename + "' of output '" +
                                     out.name + "': " + text.status().message());
    }
    out.labels = std::make_shared<const std::vector<std::string>>(SplitLabels(*text));
  }
  for (const OutputRule& r : src.spec.rules) {
    const bool labels = std::any_of(r.steps.begin(), r.steps.end(),
                                    [](const OutputRule::Step& s) { return s.op == OutputRule::Op::kLabel; });
    if (labels && !src.spec.FindOutput(r.source)->labels) {
      return Status::InvalidArgument(source + ": rule '" + r.name + "' labels output '" + r.source +
                                     "', which has no label_filename");
    }
  }

  auto entries = fs_->List(src.dir);
  if (!entries.ok()) return Status::NotFound("cannot read " + src.dir + ": " + entries.status().message());
  for (const auto& e : *entries) {
    if (!e.directory) continue;
    const std::string& v = e.name;
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

std::vector<std::string> ModelRepository::NewestVersionFiles(const ModelSource& src) const {
  std::vector<std::string> names;
  if (src.available_versions.empty()) return names;
  auto entries = fs_->List(JoinPath(src.dir, std::to_string(src.available_versions.back())));
  if (!entries.ok()) return names;
  for (const auto& e : *entries)
    if (!e.directory) names.push_back(e.name);
  return names;
}

}  // namespace inferd
