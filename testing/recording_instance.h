// RecordingInstance: a ModelInstance that returns its input as output "y"
// times 2, and records the batch sizes it was given. Thread-safe.
#pragma once

#include <mutex>
#include <vector>

#include "backends/backend.h"
#include "testing/test_requests.h"

namespace inferd::testing {

class RecordingInstance final : public ModelInstance {
 public:
  struct Log {
    std::mutex mu;
    std::vector<int64_t> batch_rows;
  };
  explicit RecordingInstance(Log* log) : log_(log) {}

  Result<std::vector<Tensor>> Execute(const std::vector<Tensor>& inputs) override {
    {
      std::lock_guard<std::mutex> g(log_->mu);
      log_->batch_rows.push_back(inputs[0].shape[0]);
    }
    std::vector<float> v = ToFloats(inputs[0]);
    for (float& f : v) f *= 2;
    return std::vector<Tensor>{F32("y", inputs[0].shape, v)};
  }

 private:
  Log* log_;
};

}  // namespace inferd::testing
