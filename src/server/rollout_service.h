// RolloutService: the RolloutController wired to the server: a RolloutHost
// over the ModelManager, and a thread that judges rollouts once a second on
// the injected Clock. The facade (InferenceServer) forwards to it.
//
// Thread-safety: thread-safe; Stop() is idempotent and joins the thread.
#pragma once

#include <memory>
#include <thread>

#include "core/mutex.h"
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
  Mutex mu_;
  CondVar cv_;
  bool stop_ TSA_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace inferd
