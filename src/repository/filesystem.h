// Filesystem: how a model repository is read. Local disk today; an object
// store (S3, GCS) is a further implementation, and tests use an in-memory one
// (testing/memory_filesystem.h). Paths are strings in the filesystem's own
// namespace ("/models/m/1" locally, "s3://bucket/m/1" for an object store),
// joined with JoinPath.
//
// Only reads: the repository is never written (run-time state lives in the
// control-state store, lifecycle/control_state_store.h).
// Thread-safety: implementations are safe to call concurrently.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace inferd {

class Filesystem {
 public:
  virtual ~Filesystem() = default;

  struct Entry {
    std::string name;  // the last path component
    bool directory = false;
  };
  struct FileInfo {
    std::string path;
    uint64_t bytes = 0;
    int64_t modified = 0;  // changes when the file does (a clock of the filesystem's own)
  };

  // The entries of `dir`, sorted by name; NOT_FOUND when it is not a
  // readable directory (the message says why, without the path).
  virtual Result<std::vector<Entry>> List(const std::string& dir) const = 0;
  virtual bool IsDirectory(const std::string& path) const = 0;
  virtual bool IsFile(const std::string& path) const = 0;
  // A whole file; NOT_FOUND when it does not exist.
  virtual Result<std::string> ReadFile(const std::string& path) const = 0;
  // The regular files under `dir` at any depth, sorted by path; empty when
  // `dir` is unreadable. What fingerprints (did a version change?) and
  // sizes (the memory estimate of a model never loaded) are made of.
  virtual std::vector<FileInfo> ListFilesRecursive(const std::string& dir) const = 0;
  // A local path to `path` that a framework can open (a backend loads model
  // files by path). Local: `path` itself; an object store would copy the
  // folder to a local cache first.
  virtual Result<std::string> LocalPath(const std::string& path) const = 0;
};

// `dir` + "/" + `name`.
std::string JoinPath(const std::string& dir, const std::string& name);
// Total size of the regular files under `dir` (0 when unreadable).
uint64_t TotalBytes(const Filesystem& fs, const std::string& dir);

// The local disk.
std::shared_ptr<const Filesystem> LocalFilesystem();

}  // namespace inferd
