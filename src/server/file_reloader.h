// FileReloader: re-reads credentials (the tokens file; TLS certificates and
// keys) while the server runs. Each source names its files and how to
// reload them; a source is reloaded when one of its files changed (checked
// every `interval`: modification time, size and inode, so that a Kubernetes
// Secret's symlink swap counts) or when ReloadAll is called (SIGHUP). A
// reload that fails (a half-written file, a key that does not match its
// certificate) is logged and the source keeps what it had; the next change
// tries again. Nothing a reload does waits for requests or makes them wait.
//
// Thread-safety: ReloadAll and Stop are thread-safe; reloads run on the
// reloader's own thread, one at a time.
#pragma once

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "core/mutex.h"
#include "core/status.h"

namespace inferd {

class FileReloader {
 public:
  struct Source {
    std::string what;                // for the log: "the tokens file", "the HTTP TLS certificate"
    std::vector<std::string> files;  // watched
    std::function<Status()> reload;
  };
  // Starts the watching thread. `clock` (not owned) times the checks.
  FileReloader(std::vector<Source> sources, Duration interval, Clock* clock);
  ~FileReloader();  // Stop()
  FileReloader(const FileReloader&) = delete;
  FileReloader& operator=(const FileReloader&) = delete;

  // Every source reloads now (on the reloader's thread; returns at once).
  void ReloadAll();
  void Stop();

  // Reloads done and failed so far (metrics, tests).
  uint64_t reloads() const;
  uint64_t failures() const;

 private:
  struct Watched {
    Source source;
    std::vector<std::string> seen;  // per file: what it looked like when last loaded
  };
  void Run();
  // Reloads `w` and remembers its files' current looks.
  void Reload(Watched& w, const char* why);

  const Duration interval_;
  Clock* const clock_;
  std::vector<Watched> watched_;  // the thread's alone once started
  mutable Mutex mu_;
  CondVar cv_;
  bool stop_ TSA_GUARDED_BY(mu_) = false;
  bool reload_all_ TSA_GUARDED_BY(mu_) = false;
  uint64_t reloads_ TSA_GUARDED_BY(mu_) = 0;
  uint64_t failures_ TSA_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace inferd
