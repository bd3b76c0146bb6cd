// GatedBackend: a test backend ("gated") whose loads and executions start and
// finish when the test says, so lifecycle and scheduling tests need no
// sleeps and no calibrated busy loops.
//
//  * Load fails with the text of a file named `fail_load` in the version
//    folder when there is one (a broken version, without a broken config).
//  * Load blocks while the gate's loads are held (HoldLoads), so a test can
//    observe LOADING and race a request against a load.
//  * Execute returns its inputs under the spec's output names (identity), but
//    first waits until the test has released that many executions
//    (ReleaseExecutions), unless the gate is open (Open, the default).
//
// Every Await* has a bound and returns false when it passes, so a broken
// test fails instead of hanging.
//
// Thread-safety: thread-safe; the Gate must outlive the backend's models.
#pragma once

#include <chrono>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "backends/backend.h"
#include "core/mutex.h"

namespace inferd::testing {

class Gate {
 public:
  static constexpr std::chrono::seconds kBound{20};

  // Executions run without waiting (the default).
  void Open() {
    MutexLock l(&mu_);
    open_ = true;
    cv_.NotifyAll();
  }
  // Executions wait for ReleaseExecutions.
  void Close() {
    MutexLock l(&mu_);
    open_ = false;
  }
  void ReleaseExecutions(int n) {
    MutexLock l(&mu_);
    released_ += n;
    cv_.NotifyAll();
  }
  void HoldLoads(bool hold) {
    MutexLock l(&mu_);
    hold_loads_ = hold;
    cv_.NotifyAll();
  }
  // Waits until `n` executions have started in total.
  bool AwaitExecutionsStarted(int n) { return AwaitCount(&started_, n); }
  bool AwaitExecutionsFinished(int n) { return AwaitCount(&finished_, n); }
  bool AwaitLoadsStarted(int n) { return AwaitCount(&loads_started_, n); }
  int executions_started() {
    MutexLock l(&mu_);
    return started_;
  }
  int loads_started() {
    MutexLock l(&mu_);
    return loads_started_;
  }

  // Backend side.
  void OnLoad() {
    MutexLock l(&mu_);
    ++loads_started_;
    cv_.NotifyAll();
    const auto deadline = std::chrono::steady_clock::now() + kBound;
    while (hold_loads_ && std::chrono::steady_clock::now() < deadline) cv_.WaitForReal(&mu_, kBound);
  }
  void OnExecute() {
    MutexLock l(&mu_);
    const int ticket = ++started_;
    cv_.NotifyAll();
    const auto deadline = std::chrono::steady_clock::now() + kBound;
    while (!open_ && released_ < ticket && std::chrono::steady_clock::now() < deadline) cv_.WaitForReal(&mu_, kBound);
  }
  void OnExecuteDone() {
    MutexLock l(&mu_);
    ++finished_;
    cv_.NotifyAll();
  }

 private:
  bool AwaitCount(const int* counter, int n) {
    MutexLock l(&mu_);
    const auto deadline = std::chrono::steady_clock::now() + kBound;
    while (*counter < n) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      cv_.WaitForReal(&mu_, deadline - std::chrono::steady_clock::now());
    }
    return true;
  }

  Mutex mu_;
  CondVar cv_;
  bool open_ TSA_GUARDED_BY(mu_) = true;
  bool hold_loads_ TSA_GUARDED_BY(mu_) = false;
  int released_ TSA_GUARDED_BY(mu_) = 0;
  int started_ TSA_GUARDED_BY(mu_) = 0;
  int finished_ TSA_GUARDED_BY(mu_) = 0;
  int loads_started_ TSA_GUARDED_BY(mu_) = 0;
};

class GatedBackend final : public Backend {
 public:
  explicit GatedBackend(Gate* gate) : gate_(gate) {}
  std::string_view name() const override { return "gated"; }
  Status AutoComplete(const std::string&, ModelSpec*) override {
    return Status::InvalidArgument("the gated backend needs a config.pbtxt with inputs");
  }
  Result<std::unique_ptr<LoadedModel>> Load(const ModelSpec& spec, const std::string& version_dir) override {
    gate_->OnLoad();
    std::ifstream fail(version_dir + "/fail_load");
    if (fail) {
      std::stringstream why;
      why << fail.rdbuf();
      return Status::InvalidArgument("gated load failed: " + why.str());
    }
    return std::unique_ptr<LoadedModel>(new Model(spec, gate_));
  }

 private:
  class Instance final : public ModelInstance {
   public:
    Instance(const ModelSpec& spec, Gate* gate) : spec_(spec), gate_(gate) {}
    Result<std::vector<Tensor>> Execute(const std::vector<Tensor>& inputs) override {
      gate_->OnExecute();
      std::vector<Tensor> out;
      for (size_t i = 0; i < inputs.size() && i < spec_.outputs.size(); ++i) {
        Tensor t = inputs[i];
        t.name = spec_.outputs[i].name;
        out.push_back(std::move(t));
      }
      gate_->OnExecuteDone();
      return out;
    }

   private:
    const ModelSpec& spec_;
    Gate* gate_;
  };
  class Model final : public LoadedModel {
   public:
    Model(ModelSpec spec, Gate* gate) : spec_(std::move(spec)), gate_(gate) {}
    Result<std::unique_ptr<ModelInstance>> CreateInstance(int) override {
      return std::unique_ptr<ModelInstance>(new Instance(spec_, gate_));
    }

   private:
    ModelSpec spec_;
    Gate* gate_;
  };
  Gate* gate_;
};

}  // namespace inferd::testing
