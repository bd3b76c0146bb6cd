#include "manager/on_demand_loader.h"

#include <algorithm>

namespace inferd {

OnDemandLoader::OnDemandLoader(int threads, Clock* clock, LoadFn load, DoneFn done)
    : clock_(clock), load_(std::move(load)), done_(std::move(done)) {
  for (int i = 0; i < std::max(1, threads); ++i) loaders_.emplace_back([this] { LoaderLoop(); });
  deadline_thread_ = std::thread([this] { DeadlineLoop(); });
}

OnDemandLoader::~OnDemandLoader() { Stop(); }

void OnDemandLoader::Enqueue(const std::string& model, std::optional<Waiter> waiter) {
  {
    MutexLock g(&mu_);
    if (!stopping_) {
      auto [it, added] = jobs_.try_emplace(model);
      if (added) queue_.push_back(model);
      if (waiter) it->second.waiters.push_back(std::move(*waiter));
      work_cv_.NotifyOne();
      if (waiter) deadline_cv_.NotifyOne();
      return;
    }
  }
  if (waiter) done_(std::move(*waiter), Status::Unavailable("the server is shutting down"));
}

bool OnDemandLoader::IsPending(const std::string& model) const {
  MutexLock g(&mu_);
  return jobs_.count(model) > 0;
}

bool OnDemandLoader::IsInUse(const std::string& model) const {
  MutexLock g(&mu_);
  return jobs_.count(model) > 0 || answering_.count(model) > 0;
}

void OnDemandLoader::LoaderLoop() {
  MutexLock g(&mu_);
  for (;;) {
    while (!stopping_ && queue_.empty()) work_cv_.Wait(&mu_);
    if (stopping_) return;
    std::string model = std::move(queue_.front());
    queue_.pop_front();
    jobs_[model].running = true;
    g.Unlock();
    const Status st = load_(model);
    g.Lock();
    auto it = jobs_.find(model);
    std::vector<Waiter> waiters = std::move(it->second.waiters);
    jobs_.erase(it);
    ++answering_[model];
    g.Unlock();
    for (auto& w : waiters) done_(std::move(w), st);  // each enqueues its request: the model is busy then
    waiters.clear();
    g.Lock();
    if (--answering_[model] == 0) answering_.erase(model);
  }
}

void OnDemandLoader::DeadlineLoop() {
  MutexLock g(&mu_);
  while (!stopping_) {
    const TimePoint now = clock_->Now();
    std::vector<Waiter> expired;
    TimePoint next = now + std::chrono::hours(1);
    for (auto& [model, job] : jobs_) {
      auto& ws = job.waiters;
      for (auto it = ws.begin(); it != ws.end();) {
        if (it->deadline <= now) {
          expired.push_back(std::move(*it));
          it = ws.erase(it);
        } else {
          next = std::min(next, it->deadline);
          ++it;
        }
      }
    }
    if (!expired.empty()) {
      g.Unlock();
      for (auto& w : expired) {
        const std::string model = w.request->model_name;
        done_(std::move(w), Status(StatusCode::kDeadlineExceeded,
                                   "model '" + model + "' did not finish loading within the request's wait bound"));
      }
      g.Lock();
      continue;
    }
    deadline_cv_.WaitUntil(&mu_, clock_, next);
  }
}

void OnDemandLoader::RequestStop() {
  {
    MutexLock g(&mu_);
    stopping_ = true;
  }
  work_cv_.NotifyAll();
  deadline_cv_.NotifyAll();
}

void OnDemandLoader::Stop() {
  RequestStop();
  for (auto& t : loaders_) t.join();
  loaders_.clear();
  if (deadline_thread_.joinable()) deadline_thread_.join();
  std::map<std::string, Job> left;
  {
    MutexLock g(&mu_);
    left.swap(jobs_);
    queue_.clear();
  }
  for (auto& [model, job] : left)
    for (auto& w : job.waiters) done_(std::move(w), Status::Unavailable("the server is shutting down"));
}

}  // namespace inferd
