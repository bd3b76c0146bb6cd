#include "backends/gate/gate_backend.h"

#include <charconv>
#include <chrono>
#include <cstring>
#include <map>

#include "backends/echo.h"
#include "core/mutex.h"

namespace inferd {
namespace {

class Gate {
 public:
  // Waits while the gate is closed, at most `limit`; false when it stayed closed.
  bool Pass(std::chrono::milliseconds limit) {
    MutexLock g(&mu_);
    ++waiting_;
    changed_.NotifyAll();
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (!open_) {
      const auto now = std::chrono::steady_clock::now();
      if (now >= deadline) break;
      changed_.WaitForReal(&mu_, deadline - now);
    }
    --waiting_;
    return open_;
  }
  void Set(bool open) {
    MutexLock g(&mu_);
    open_ = open;
    changed_.NotifyAll();
  }
  int32_t waiting() const {
    MutexLock g(&mu_);
    return waiting_;
  }

 private:
  mutable Mutex mu_;
  CondVar changed_;
  bool open_ TSA_GUARDED_BY(mu_) = false;
  int32_t waiting_ TSA_GUARDED_BY(mu_) = 0;
};

class HeldInstance final : public ModelInstance {
 public:
  HeldInstance(const ModelSpec& spec, std::shared_ptr<Gate> gate, std::string gate_name,
               std::chrono::milliseconds limit)
      : spec_(spec), gate_(std::move(gate)), gate_name_(std::move(gate_name)), limit_(limit) {}
  Result<std::vector<Tensor>> Execute(const std::vector<Tensor>& inputs) override {
    if (!gate_->Pass(limit_)) {
      return Status::Unavailable("gate '" + gate_name_ + "' stayed closed for " + std::to_string(limit_.count()) +
                                 " ms (max_hold_ms)");
    }
    return EchoInputs(spec_, inputs);
  }

 private:
  const ModelSpec& spec_;
  std::shared_ptr<Gate> gate_;
  std::string gate_name_;
  std::chrono::milliseconds limit_;
};

class ControlInstance final : public ModelInstance {
 public:
  explicit ControlInstance(std::shared_ptr<Gate> gate) : gate_(std::move(gate)) {}
  Result<std::vector<Tensor>> Execute(const std::vector<Tensor>& inputs) override {
    if (inputs.size() != 1 || inputs[0].dtype != DataType::kInt32 || inputs[0].byte_size != 4) {
      return Status::InvalidArgument("a gate control model takes one INT32 [1] input 'open'");
    }
    int32_t open = 0;
    std::memcpy(&open, inputs[0].data, 4);
    if (open == 0 || open == 1) gate_->Set(open == 1);
    const int32_t waiting = gate_->waiting();
    return std::vector<Tensor>{
        Tensor::Copy("waiting", DataType::kInt32, {1}, std::as_bytes(std::span<const int32_t>(&waiting, 1)))};
  }

 private:
  std::shared_ptr<Gate> gate_;
};

class GateModel final : public LoadedModel {
 public:
  GateModel(ModelSpec spec, bool control, std::shared_ptr<Gate> gate, std::string gate_name,
            std::chrono::milliseconds limit)
      : spec_(std::move(spec)),
        control_(control),
        gate_(std::move(gate)),
        gate_name_(std::move(gate_name)),
        limit_(limit) {}
  Result<std::unique_ptr<ModelInstance>> CreateInstance(int) override {
    if (control_) return std::unique_ptr<ModelInstance>(new ControlInstance(gate_));
    return std::unique_ptr<ModelInstance>(new HeldInstance(spec_, gate_, gate_name_, limit_));
  }

 private:
  ModelSpec spec_;
  bool control_;
  std::shared_ptr<Gate> gate_;
  std::string gate_name_;
  std::chrono::milliseconds limit_;
};

std::string Param(const ModelSpec& spec, const std::string& key, std::string fallback) {
  auto it = spec.parameters.find(key);
  return it == spec.parameters.end() ? fallback : it->second;
}

class GateBackend final : public Backend {
 public:
  std::string_view name() const override { return "gate"; }
  Status AutoComplete(const std::string&, ModelSpec*) override {
    return Status::InvalidArgument("the gate backend needs a config.pbtxt with inputs");
  }
  Result<std::unique_ptr<LoadedModel>> Load(const ModelSpec& spec, const std::string&) override {
    const std::string role = Param(spec, "role", "held");
    const std::string gate_name = Param(spec, "gate", spec.name);
    const std::string hold = Param(spec, "max_hold_ms", "60000");
    int64_t ms = 0;
    auto [p, ec] = std::from_chars(hold.data(), hold.data() + hold.size(), ms);
    if (ec != std::errc() || p != hold.data() + hold.size() || ms < 0) {
      return Status::InvalidArgument("gate model '" + spec.name + "': max_hold_ms must be a non-negative integer");
    }
    const std::string where = "gate model '" + spec.name + "'";
    if (role == "control") {
      const bool ok = spec.max_batch_size == 0 && spec.inputs.size() == 1 && spec.outputs.size() == 1 &&
                      spec.inputs[0].name == "open" && spec.inputs[0].dtype == DataType::kInt32 &&
                      spec.outputs[0].name == "waiting" && spec.outputs[0].dtype == DataType::kInt32;
      if (!ok) {
        return Status::InvalidArgument(where +
                                       ": role 'control' needs max_batch_size 0, input 'open' and output 'waiting', "
                                       "both TYPE_INT32 dims [1]");
      }
    } else if (role == "held") {
      INFERD_RETURN_IF_ERROR(CheckEchoSpec(spec, where));
    } else {
      return Status::InvalidArgument(where + ": role must be 'held' or 'control', not '" + role + "'");
    }
    return std::unique_ptr<LoadedModel>(
        new GateModel(spec, role == "control", GateNamed(gate_name), gate_name, std::chrono::milliseconds(ms)));
  }

 private:
  std::shared_ptr<Gate> GateNamed(const std::string& name) {
    MutexLock g(&mu_);
    auto& gate = gates_[name];
    if (!gate) gate = std::make_shared<Gate>();
    return gate;
  }

  Mutex mu_;
  std::map<std::string, std::shared_ptr<Gate>> gates_ TSA_GUARDED_BY(mu_);
};

}  // namespace

std::unique_ptr<Backend> MakeGateBackend() { return std::make_unique<GateBackend>(); }

Status RegisterGateBackend(BackendRegistry* registry) { return registry->Register(MakeGateBackend()); }

}  // namespace inferd
