#include "server/file_reloader.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

namespace inferd {
namespace {

// What a file looks like: "" when it cannot be read (a reload then waits for it to come back).
std::string LookOf(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "";
  return std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) + ":" + std::to_string(st.st_size) + ":" +
         std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec);
}

}  // namespace

FileReloader::FileReloader(std::vector<Source> sources, Duration interval, Clock* clock)
    : interval_(interval), clock_(clock) {
  for (Source& s : sources) {
    Watched w;
    for (const std::string& f : s.files) w.seen.push_back(LookOf(f));
    w.source = std::move(s);
    watched_.push_back(std::move(w));
  }
  thread_ = std::thread([this] { Run(); });
}

FileReloader::~FileReloader() { Stop(); }

void FileReloader::Stop() {
  {
    MutexLock l(&mu_);
    stop_ = true;
  }
  cv_.NotifyAll();
  if (thread_.joinable()) thread_.join();
}

void FileReloader::ReloadAll() {
  {
    MutexLock l(&mu_);
    reload_all_ = true;
  }
  cv_.NotifyAll();
}

uint64_t FileReloader::reloads() const {
  MutexLock l(&mu_);
  return reloads_;
}

uint64_t FileReloader::failures() const {
  MutexLock l(&mu_);
  return failures_;
}

void FileReloader::Run() {
  for (;;) {
    bool all;
    {
      MutexLock l(&mu_);
      const TimePoint deadline = clock_->Now() + interval_;
      while (!stop_ && !reload_all_ && clock_->Now() < deadline) cv_.WaitUntil(&mu_, clock_, deadline);
      if (stop_) return;
      all = std::exchange(reload_all_, false);
    }
    for (Watched& w : watched_) {
      if (all) {
        Reload(w, "SIGHUP");
        continue;
      }
      for (size_t i = 0; i < w.source.files.size(); ++i) {
        const std::string look = LookOf(w.source.files[i]);
        if (!look.empty() && look != w.seen[i]) {
          Reload(w, "changed");
          break;
        }
      }
    }
  }
}

void FileReloader::Reload(Watched& w, const char* why) {
  // Looked at before reading: a write during the reload shows as a change at the next check.
  for (size_t i = 0; i < w.source.files.size(); ++i) w.seen[i] = LookOf(w.source.files[i]);
  const Status st = w.source.reload();
  MutexLock l(&mu_);
  if (st.ok()) {
    ++reloads_;
    spdlog::info("reloaded {} ({})", w.source.what, why);
  } else {
    ++failures_;
    spdlog::error("cannot reload {} ({}): {}; still using the one loaded before", w.source.what, why, st.message());
  }
}

}  // namespace inferd
