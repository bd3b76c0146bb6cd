// An in-memory Filesystem for tests: files are put by path, folders exist
// when a file or an explicit folder lies under them. Each Put bumps the
// file's modification counter, so a rewrite is a change (fingerprints).
// LocalPath answers the path itself: backends that open files by path
// (TorchScript) cannot load from it; the identity and gated backends can.
// Thread-safety: safe to call concurrently (one mutex).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/mutex.h"
#include "repository/filesystem.h"

namespace inferd::testing {

class MemoryFilesystem final : public Filesystem {
 public:
  void Put(const std::string& path, std::string content) {
    MutexLock g(&mu_);
    auto& f = files_[path];
    f.content = std::move(content);
    f.modified = ++clock_;
  }
  void MakeDirectory(const std::string& path) {
    MutexLock g(&mu_);
    dirs_[path] = true;
  }
  // Removes `path` and everything under it.
  void Remove(const std::string& path) {
    MutexLock g(&mu_);
    for (auto it = files_.begin(); it != files_.end();) it = Under(it->first, path) ? files_.erase(it) : std::next(it);
    for (auto it = dirs_.begin(); it != dirs_.end();) it = Under(it->first, path) ? dirs_.erase(it) : std::next(it);
  }

  Result<std::vector<Entry>> List(const std::string& dir) const override {
    MutexLock g(&mu_);
    if (!IsDirectoryLocked(dir)) return Status::NotFound("No such file or directory");
    std::map<std::string, bool> names;
    auto add = [&](const std::string& path, bool is_dir) {
      if (path.size() <= dir.size() + 1 || path.compare(0, dir.size() + 1, dir + "/") != 0) return;
      const std::string rest = path.substr(dir.size() + 1);
      const size_t slash = rest.find('/');
      names[rest.substr(0, slash)] |= is_dir || slash != std::string::npos;
    };
    for (const auto& [p, f] : files_) add(p, false);
    for (const auto& [p, d] : dirs_) add(p, true);
    std::vector<Entry> out;
    for (const auto& [n, d] : names) out.push_back({n, d});
    return out;
  }
  bool IsDirectory(const std::string& path) const override {
    MutexLock g(&mu_);
    return IsDirectoryLocked(path);
  }
  bool IsFile(const std::string& path) const override {
    MutexLock g(&mu_);
    return files_.count(path) > 0;
  }
  Result<std::string> ReadFile(const std::string& path) const override {
    MutexLock g(&mu_);
    auto it = files_.find(path);
    if (it == files_.end()) return Status::NotFound("'" + path + "' does not exist");
    return it->second.content;
  }
  std::vector<FileInfo> ListFilesRecursive(const std::string& dir) const override {
    MutexLock g(&mu_);
    std::vector<FileInfo> out;
    for (const auto& [p, f] : files_)
      if (Under(p, dir) && p != dir) out.push_back({p, f.content.size(), f.modified});
    return out;
  }
  Result<std::string> LocalPath(const std::string& path) const override { return path; }

 private:
  struct File {
    std::string content;
    int64_t modified = 0;
  };
  static bool Under(const std::string& path, const std::string& dir) {
    return path == dir ||
           (path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 && path[dir.size()] == '/');
  }
  bool IsDirectoryLocked(const std::string& path) const TSA_REQUIRES(mu_) {
    for (const auto& [p, d] : dirs_)
      if (Under(p, path)) return true;
    for (const auto& [p, f] : files_)
      if (Under(p, path) && p != path) return true;
    return false;
  }

  mutable Mutex mu_;
  std::map<std::string, File> files_ TSA_GUARDED_BY(mu_);
  std::map<std::string, bool> dirs_ TSA_GUARDED_BY(mu_);
  int64_t clock_ TSA_GUARDED_BY(mu_) = 0;
};

}  // namespace inferd::testing
