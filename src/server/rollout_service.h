// RolloutService: the RolloutController wired to the server: a RolloutHost
// over the ModelManager, and a thread that judges rollouts once a second on
// the injected Clock. The facade (InferenceServer) forwards to it.
//
// Thread-safety: thread-safe; Stop() is idempotent and joins the thread.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "manager/model_manager.h"
#include "server/rollout_controller.h"

namespace inferd {

class RolloutService {
 public:
  RolloutService(ModelManager* manager, ControlStateStore* state, Clock* clock);
  ~RolloutService();

  // Resumes persisted rollouts, then starts the thread.
  void Start();
  void Stop();

  RolloutController& controller() { return *controller_; }

 private:
  void Loop();

  std::unique_ptr<RolloutHost> host_;
  std::unique_ptr<RolloutController> controller_;
  Clock* clock_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // guarded by mu_ (std::mutex for Clock::WaitUntil)
  std::thread thread_;
};

}  // namespace inferd
