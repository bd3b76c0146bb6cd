// A scheduler that answers in parts, for tests of partial responses (token
// streaming, decoupled models): one partial response per row of the first
// input (output "y" = [row, row]), then an empty final answer. A request
// without a partial callback is refused; a partial callback that returns
// false (client gone) stops the parts. Thread-safety: stateless.
#pragma once

#include "scheduler/scheduler_factory.h"
#include "testing/test_requests.h"

namespace inferd::testing {

class PartsScheduler final : public Scheduler {
 public:
  Status Enqueue(std::unique_ptr<PendingRequest>& p) override {
    if (!p->partial) return Status::InvalidArgument("this model answers in parts: use a streaming API");
    std::unique_ptr<PendingRequest> taken = std::move(p);
    const Tensor& x = taken->request->inputs[0];
    for (int64_t row = 0; row < x.shape[0]; ++row) {
      InferResponse part;
      part.model_name = taken->request->model_name;
      part.model_version = taken->request->model_version;
      part.outputs.push_back(F32("y", {1, 2}, {static_cast<float>(row)}));
      if (!taken->partial(std::move(part))) break;
    }
    taken->callback(InferResponse{});
    return Status::OK();
  }
  size_t QueueSize() const override { return 0; }
  void Shutdown() override {}
};

// A factory whose "dynamic" scheduler is a PartsScheduler.
inline SchedulerFactory PartsSchedulers() {
  SchedulerFactory parts;
  parts.Register("dynamic", [](SchedulerContext) -> Result<std::unique_ptr<Scheduler>> {
    return std::unique_ptr<Scheduler>(new PartsScheduler());
  });
  return parts;
}

}  // namespace inferd::testing
