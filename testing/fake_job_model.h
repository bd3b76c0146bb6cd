// FakeModel: a model behind a RequestSubmitter for batch job tests, answered
// on its own thread. Tests only.
//
// Thread-safety: thread-safe.
#pragma once

#include <deque>
#include <span>
#include <thread>

#include "core/mutex.h"
#include "core/request_submitter.h"

namespace inferd::testing {

// A model behind a RequestSubmitter: y = x0 + 10 * x1 per row (x: FP32 [2],
// y: FP32 [1], max_batch_size 4), answered on its own thread. A request with
// a row whose x0 is -13 fails as a whole; the first `unavailable` requests
// are refused as overloaded; after `fail_after` answers every request is
// NOT_FOUND (the model went away); `hold` keeps answers until Release().
class FakeModel : public RequestSubmitter {
 public:
  FakeModel() : worker_([this] { Work(); }) {}
  ~FakeModel() override {
    {
      MutexLock l(&mu_);
      stop_ = true;
      hold_ = false;
      cv_.NotifyAll();
    }
    worker_.join();
  }

  Result<ModelSpec> Describe(const std::string& model, const std::string&) override {
    if (model != "fake") return Status::NotFound("unknown model '" + model + "'");
    ModelSpec s;
    s.name = "fake";
    s.max_batch_size = 4;
    s.inputs.push_back(TensorSpec{"x", DataType::kFp32, {2}});
    s.outputs.push_back(TensorSpec{"y", DataType::kFp32, {1}});
    return s;
  }

  void Submit(std::unique_ptr<InferRequest> r, InferCallback cb) override {
    MutexLock l(&mu_);
    ++submitted_;
    if (!r->background) ++foreground_;
    rows_seen_ += r->inputs.at(0).shape.at(0);
    if (unavailable_ > 0) {
      --unavailable_;
      l.Unlock();
      cb(Status::Unavailable("queue is full"));
      return;
    }
    queue_.emplace_back(std::move(r), std::move(cb));
    cv_.NotifyAll();
  }

  void SetUnavailable(int n) {
    MutexLock l(&mu_);
    unavailable_ = n;
  }
  void SetFailAfter(int n) {
    MutexLock l(&mu_);
    fail_after_ = n;
  }
  void Hold() {
    MutexLock l(&mu_);
    hold_ = true;
  }
  void Release() {
    MutexLock l(&mu_);
    hold_ = false;
    cv_.NotifyAll();
  }
  // Waits (bounded) until `n` requests wait in a held queue.
  bool WaitHeld(size_t n) {
    MutexLock l(&mu_);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (queue_.size() < n) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      cv_.WaitForReal(&mu_, std::chrono::milliseconds(50));
    }
    return true;
  }
  int submitted() const {
    MutexLock l(&mu_);
    return submitted_;
  }
  int foreground() const {
    MutexLock l(&mu_);
    return foreground_;
  }
  int64_t rows_seen() const {
    MutexLock l(&mu_);
    return rows_seen_;
  }

 private:
  void Work() {
    for (;;) {
      std::unique_ptr<InferRequest> r;
      InferCallback cb;
      bool gone = false;
      {
        MutexLock l(&mu_);
        while (!stop_ && (queue_.empty() || hold_)) cv_.Wait(&mu_);
        if (queue_.empty()) return;
        r = std::move(queue_.front().first);
        cb = std::move(queue_.front().second);
        queue_.pop_front();
        gone = fail_after_ >= 0 && answered_ >= fail_after_;
        ++answered_;
      }
      if (gone) {
        cb(Status::NotFound("model 'fake' is not loaded"));
        continue;
      }
      const Tensor& x = r->inputs.at(0);
      const int64_t rows = x.shape.at(0);
      const float* in = x.as<float>();
      bool poisoned = false;
      std::vector<float> y(static_cast<size_t>(rows));
      for (int64_t i = 0; i < rows; ++i) {
        poisoned |= in[2 * i] == -13.0f;
        y[static_cast<size_t>(i)] = in[2 * i] + 10 * in[2 * i + 1];
      }
      if (poisoned) {
        cb(Status::InvalidArgument("thirteen is unlucky"));
        continue;
      }
      InferResponse resp;
      resp.model_name = "fake";
      resp.model_version = "1";
      resp.outputs.push_back(
          Tensor::Copy("y", DataType::kFp32, {rows, 1}, std::as_bytes(std::span<const float>(y.data(), y.size()))));
      cb(std::move(resp));
    }
  }

  mutable Mutex mu_;
  CondVar cv_;
  std::deque<std::pair<std::unique_ptr<InferRequest>, InferCallback>> queue_ TSA_GUARDED_BY(mu_);
  bool stop_ TSA_GUARDED_BY(mu_) = false;
  bool hold_ TSA_GUARDED_BY(mu_) = false;
  int unavailable_ TSA_GUARDED_BY(mu_) = 0;
  int fail_after_ TSA_GUARDED_BY(mu_) = -1;
  int answered_ TSA_GUARDED_BY(mu_) = 0;
  int submitted_ TSA_GUARDED_BY(mu_) = 0;
  int foreground_ TSA_GUARDED_BY(mu_) = 0;
  int64_t rows_seen_ TSA_GUARDED_BY(mu_) = 0;
  std::thread worker_;
};

}  // namespace inferd::testing
