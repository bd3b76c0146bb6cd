// RepositorySource: the model repository as a source for the ModelManager.
// At start it says which models should serve (every model, or the start-up
// list, depending on the control mode; under on-demand residency it indexes
// every model and loads only pinned and listed ones -- a repository of more
// than index_at_start_limit models is indexed on a thread of its own after
// Start returns: the server is ready at once, a pinned model loads when the
// index finds it, any model loads on its first request); in poll mode it rescans
// the repository every poll interval: new and changed models (re)load,
// removed ones are unloaded and forgotten.
//
// The poll thread waits on the injected Clock, so tests drive polls with a
// FakeClock (or call Poll directly).
//
// Thread-safety: Start and Stop are called once each from the owning thread;
// Poll may run concurrently with everything else (the manager serializes
// per model). Ownership: repository, manager and clock are not owned and
// must outlive the source.
#pragma once

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "core/mutex.h"
#include "manager/model_manager.h"

namespace inferd {

enum class ModelControlMode { kNone, kPoll, kExplicit };

class RepositorySource {
 public:
  struct Options {
    ModelControlMode control_mode = ModelControlMode::kNone;
    // kExplicit / kPoll: models to load at start-up ("*" = all; kPoll loads
    // all when empty).
    std::vector<std::string> startup_models;
    // kPoll: time between rescans (0 = only Poll calls).
    Duration poll_interval = std::chrono::seconds(15);
    // On-demand residency: indexing reads every model's config (~70 us a model
    // on a 2-core VM); up to this many models it happens in Start, beyond it
    // in the background.
    size_t index_at_start_limit = 10000;
    // Runs after each rescan (the server re-reads the models' LoRA adapters); may be null.
    std::function<void()> after_poll;
  };

  RepositorySource(Options options, const ModelRepository* repository, ModelManager* manager, Clock* clock);
  ~RepositorySource();
  RepositorySource(const RepositorySource&) = delete;
  RepositorySource& operator=(const RepositorySource&) = delete;

  // Loads the start-up models (a model that fails is logged and recorded;
  // only an unreadable repository fails) and starts the poll thread.
  // Cancelled when AbandonStart was called: the model loading then finished,
  // the rest were not loaded, the poll thread was not started.
  Status Start();
  // From any thread (a stop signal during start-up): Start loads no further
  // model and returns Cancelled. Idempotent.
  void AbandonStart();
  // One rescan (kPoll).
  void Poll();
  // Stops the poll and index threads (a rescan in progress finishes first;
  // the index stops at the next model). Idempotent.
  void Stop();

 private:
  void PollLoop();
  void IndexInBackground(const std::vector<std::string>& names);
  bool Stopping();
  bool StartAbandoned();

  const Options options_;
  const ModelRepository* repository_;
  ModelManager* manager_;
  Clock* clock_;
  Mutex mu_;
  CondVar cv_;
  bool stopping_ TSA_GUARDED_BY(mu_) = false;
  bool start_abandoned_ TSA_GUARDED_BY(mu_) = false;
  std::thread thread_;        // polls
  std::thread index_thread_;  // the background index
};

}  // namespace inferd
