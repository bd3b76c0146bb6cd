// OnDemandLoader: loads models when a request needs one that is not resident
// (on-demand residency). Requests wait here, each bounded by its own
// deadline, while a small pool of loader threads (--model-load-threads)
// makes their model resident; concurrent requests for one model share one
// load. Model code never runs on the caller's (HTTP) thread.
//
// Thread-safety: thread-safe. `load` runs on loader threads, one call per
// model at a time. `done` runs exactly once per waiter: on a loader thread
// after the load (with its status), on the deadline thread when the waiter's
// deadline passes first (DEADLINE_EXCEEDED), or in Stop (UNAVAILABLE); it
// must not block for long.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "core/infer_request.h"
#include "core/mutex.h"

namespace inferd {

class OnDemandLoader {
 public:
  struct Waiter {
    std::unique_ptr<InferRequest> request;  // its model_name names the model (also for a `resident` waiter)
    InferCallback callback;
    PartialCallback partial;  // may be null
    TimePoint arrival;
    TimePoint deadline;
    // Set for a caller that waits for the model itself, not to run a
    // request (metadata and config routes): `done` calls it
    // instead of dispatching `request`.
    std::function<void(const Status&)> resident;
  };
  using LoadFn = std::function<Status(const std::string& model)>;
  using DoneFn = std::function<void(Waiter waiter, const Status& status)>;

  // `clock` is not owned and must outlive the loader.
  OnDemandLoader(int threads, Clock* clock, LoadFn load, DoneFn done);
  ~OnDemandLoader();

  // Queues a load of `model` unless one is queued or running; the waiter (if
  // any) is answered when that load finishes or at its deadline.
  void Enqueue(const std::string& model, std::optional<Waiter> waiter);
  // Whether a load of `model` is queued or running.
  bool IsPending(const std::string& model) const;
  // IsPending, or its finished load's waiters are being answered now (their
  // requests are not in the model's queue yet): the model must not be
  // evicted, or they would find it gone.
  bool IsInUse(const std::string& model) const;
  // Lets running loads finish, answers every other waiter UNAVAILABLE and
  // joins the threads. Idempotent.
  void Stop();
  // Stop's first half: no load starts after it returns (Stop completes it).
  void RequestStop();

 private:
  struct Job {
    std::vector<Waiter> waiters;
    bool running = false;
  };
  void LoaderLoop();
  void DeadlineLoop();

  Clock* clock_;
  LoadFn load_;
  DoneFn done_;
  mutable Mutex mu_;
  CondVar work_cv_, deadline_cv_;
  std::map<std::string, Job> jobs_ TSA_GUARDED_BY(mu_);
  std::map<std::string, int> answering_ TSA_GUARDED_BY(mu_);  // model -> loader threads answering its waiters
  std::deque<std::string> queue_ TSA_GUARDED_BY(mu_);
  bool stopping_ TSA_GUARDED_BY(mu_) = false;
  std::vector<std::thread> loaders_;
  std::thread deadline_thread_;
};

}  // namespace inferd
