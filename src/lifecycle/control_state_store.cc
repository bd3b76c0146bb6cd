#include "lifecycle/control_state_store.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "core/mutex.h"

namespace inferd {
namespace {

namespace fs = std::filesystem;

// Model names come from repository folder names; document names from inferd.
// Neither may climb out of the state directory.
Status CheckKey(std::string_view model, std::string_view name) {
  for (std::string_view part : {model, name}) {
    if (part.empty() || part == "." || part == ".." || part.find('/') != std::string_view::npos ||
        part.find('\0') != std::string_view::npos) {
      return Status::InvalidArgument("invalid control-state key '" + std::string(part) + "'");
    }
  }
  return Status::OK();
}

class DirectoryStateStore final : public ControlStateStore {
 public:
  explicit DirectoryStateStore(std::string dir) : dir_(std::move(dir)) {}

  Status Open() override {
    std::error_code ec;
    fs::create_directories(dir_, ec);
    if (ec) return Status::Unavailable("cannot create the control-state directory " + dir_ + ": " + ec.message());
    if (::access(dir_.c_str(), W_OK) != 0) {
      return Status::Unavailable("the control-state directory " + dir_ + " is not writable");
    }
    return Status::OK();
  }

  Result<std::optional<std::string>> Get(std::string_view model, std::string_view name) const override {
    INFERD_RETURN_IF_ERROR(CheckKey(model, name));
    const fs::path path = Path(model, name);
    std::ifstream f(path);
    if (!f) {
      std::error_code ec;
      if (!fs::exists(path, ec)) return std::optional<std::string>();
      return Status::Unavailable(path.string() + ": cannot be read");
    }
    std::stringstream ss;
    ss << f.rdbuf();
    return std::optional<std::string>(ss.str());
  }

  Status Put(std::string_view model, std::string_view name, std::string_view text) override {
    INFERD_RETURN_IF_ERROR(CheckKey(model, name));
    const fs::path path = Path(model, name);
    std::error_code ec;
    fs::create_directories(path.parent_path(), ec);
    if (ec) return Status::Unavailable("cannot create " + path.parent_path().string() + ": " + ec.message());
    const fs::path tmp = path.string() + ".tmp";
    {
      std::ofstream f(tmp, std::ios::trunc);
      f << text;
      f.flush();
      if (!f) return Status::Unavailable("cannot write " + tmp.string());
    }
    fs::rename(tmp, path, ec);
    if (ec) return Status::Unavailable("cannot replace " + path.string() + ": " + ec.message());
    return Status::OK();
  }

  std::string Describe() const override { return dir_; }

 private:
  fs::path Path(std::string_view model, std::string_view name) const {
    return fs::path(dir_) / std::string(model) / (std::string(name) + ".json");
  }
  const std::string dir_;
};

class MemoryStateStore final : public ControlStateStore {
 public:
  Result<std::optional<std::string>> Get(std::string_view model, std::string_view name) const override {
    MutexLock g(&mu_);
    auto it = docs_.find(Key(model, name));
    if (it == docs_.end()) return std::optional<std::string>();
    return std::optional<std::string>(it->second);
  }
  Status Put(std::string_view model, std::string_view name, std::string_view text) override {
    MutexLock g(&mu_);
    docs_[Key(model, name)] = std::string(text);
    return Status::OK();
  }
  std::string Describe() const override { return "memory (not persisted)"; }

 private:
  static std::string Key(std::string_view model, std::string_view name) {
    return std::string(model) + '\0' + std::string(name);
  }
  mutable Mutex mu_;
  std::map<std::string, std::string> docs_ TSA_GUARDED_BY(mu_);
};

}  // namespace

std::unique_ptr<ControlStateStore> MakeDirectoryStateStore(std::string dir) {
  return std::make_unique<DirectoryStateStore>(std::move(dir));
}

std::unique_ptr<ControlStateStore> MakeMemoryStateStore() { return std::make_unique<MemoryStateStore>(); }

std::string DefaultStateDirectory(const std::string& repository, const char* xdg_state_home, const char* home) {
  std::error_code ec;
  std::string abs = fs::absolute(repository, ec).lexically_normal().string();
  if (ec) abs = repository;
  while (abs.size() > 1 && abs.back() == '/') abs.pop_back();
  std::string key;
  for (char c : abs) {
    if (c == '_')
      key += "__";
    else if (c == '/')
      key += '_';
    else
      key += c;
  }
  fs::path base;
  if (xdg_state_home && *xdg_state_home)
    base = fs::path(xdg_state_home) / "inferd";
  else if (home && *home)
    base = fs::path(home) / ".local" / "state" / "inferd";
  else
    base = "/var/lib/inferd";
  return (base / "repositories" / key).string();
}

}  // namespace inferd
