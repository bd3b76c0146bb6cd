#include "manager/repository_source.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>

namespace inferd {

RepositorySource::RepositorySource(Options options, const ModelRepository* repository, ModelManager* manager,
                                   Clock* clock)
    : options_(std::move(options)), repository_(repository), manager_(manager), clock_(clock) {}

RepositorySource::~RepositorySource() { Stop(); }

Status RepositorySource::Start() {
  INFERD_ASSIGN_OR_RETURN(std::vector<std::string> names, repository_->ListModels());
  if (names.empty()) spdlog::warn("the model repository {} has no models", repository_->root());
  const bool star = std::count(options_.startup_models.begin(), options_.startup_models.end(), "*") > 0;
  std::vector<std::string> to_load;
  if (manager_->on_demand()) {
    // Pinned and listed models load now; the rest load on demand.
    std::set<std::string> pinned;
    if (names.size() <= options_.index_at_start_limit) {
      const TimePoint t0 = clock_->Now();
      for (const auto& n : names) {
        if (StartAbandoned()) return Status::Cancelled("start-up abandoned while indexing");
        if (manager_->Index(n)) pinned.insert(n);
      }
      spdlog::info("indexed {} models for on-demand loading in {:.0f} ms", names.size(),
                   std::chrono::duration<double, std::milli>(clock_->Now() - t0).count());
    } else {
      spdlog::info(
          "{} models (more than --startup-index-limit {}): indexing them in the background; each loads on its "
          "first request, pinned ones as the index finds them",
          names.size(), options_.index_at_start_limit);
      index_thread_ = std::thread([this, names] { IndexInBackground(names); });
    }
    to_load.assign(pinned.begin(), pinned.end());
    for (const auto& n : options_.startup_models)
      if (n != "*" && !pinned.count(n)) to_load.push_back(n);
    if (star) to_load = names;
  } else if (star || options_.control_mode == ModelControlMode::kNone ||
             (options_.control_mode == ModelControlMode::kPoll && options_.startup_models.empty())) {
    to_load = names;
  } else {
    to_load = options_.startup_models;
  }
  for (const auto& n : to_load) {
    if (StartAbandoned()) {
      spdlog::info("start-up abandoned: {} of {} start-up models not loaded", to_load.size() - (&n - to_load.data()),
                   to_load.size());
      return Status::Cancelled("start-up abandoned");
    }
    (void)manager_->Reconcile(n, Aspiration{});  // errors are logged and recorded
  }
  if (options_.control_mode == ModelControlMode::kPoll && options_.poll_interval.count() > 0) {
    thread_ = std::thread([this] { PollLoop(); });
  }
  return Status::OK();
}

void RepositorySource::AbandonStart() {
  MutexLock l(&mu_);
  start_abandoned_ = true;
}

bool RepositorySource::StartAbandoned() {
  MutexLock l(&mu_);
  return start_abandoned_;
}

bool RepositorySource::Stopping() {
  MutexLock l(&mu_);
  return stopping_;
}

void RepositorySource::IndexInBackground(const std::vector<std::string>& names) {
  const TimePoint t0 = clock_->Now();
  size_t pinned = 0;
  for (const auto& n : names) {
    if (Stopping()) return;
    if (!manager_->Index(n)) continue;
    ++pinned;
    (void)manager_->Reconcile(n, Aspiration{});  // errors are logged and recorded
  }
  spdlog::info("indexed {} models for on-demand loading in the background in {:.0f} ms ({} pinned, loaded)",
               names.size(), std::chrono::duration<double, std::milli>(clock_->Now() - t0).count(), pinned);
}

void RepositorySource::PollLoop() {
  MutexLock l(&mu_);
  TimePoint next = clock_->Now() + options_.poll_interval;
  while (!stopping_) {
    if (clock_->Now() < next) {
      cv_.WaitUntil(&mu_, clock_, next);
      continue;
    }
    l.Unlock();
    Poll();
    l.Lock();
    next = clock_->Now() + options_.poll_interval;
  }
}

void RepositorySource::Stop() {
  {
    MutexLock l(&mu_);
    stopping_ = true;
  }
  cv_.NotifyAll();
  if (thread_.joinable()) thread_.join();
  if (index_thread_.joinable()) index_thread_.join();
}

void RepositorySource::Poll() {
  auto names = repository_->ListModels();
  if (!names.ok()) {
    spdlog::warn("repository poll: {}", names.status().message());
    return;
  }
  const std::set<std::string> present(names->begin(), names->end());
  for (const auto& n : *names) {
    {
      MutexLock l(&mu_);
      if (stopping_) return;
    }
    // On demand, only resident models reload (when changed); the rest are
    // re-indexed and load fresh on their next request.
    if (manager_->on_demand() && !manager_->Serving(n) && !manager_->Index(n)) continue;
    Aspiration want;
    want.retry_failed = false;
    (void)manager_->Reconcile(n, want);  // errors are logged and recorded
  }
  for (const auto& n : manager_->ModelNames())
    if (!present.count(n)) manager_->Remove(n);
  if (options_.after_poll) options_.after_poll();
}

}  // namespace inferd
