#include "server/rollout_service.h"

namespace inferd {
namespace {

class ManagerHost final : public RolloutHost {
 public:
  explicit ManagerHost(ModelManager* m) : m_(m) {}

  Result<int64_t> DefaultVersion(const std::string& model) override {
    auto s = m_->Serving(model);
    if (!s) return m_->NotServing(model);
    return s->default_version;
  }
  Result<int64_t> LabelVersion(const std::string& model, const std::string& label) override {
    return m_->ResolveLabel(model, label);
  }
  Status SetLabel(const std::string& model, const std::string& label, int64_t version) override {
    return m_->SetLabel(model, label, version).status();
  }
  Status DeleteLabel(const std::string& model, const std::string& label) override {
    return m_->DeleteLabel(model, label).status();
  }
  Status SetTraffic(const std::string& model, const TrafficPolicy& policy) override {
    return m_->SetTraffic(model, policy).status();
  }
  Status ClearTraffic(const std::string& model) override { return m_->ClearTraffic(model).status(); }
  Result<VersionCounters> Counters(const std::string& model, int64_t version) override {
    auto s = m_->Serving(model);
    if (!s) return m_->NotServing(model);
    auto it = s->versions.find(version);
    if (it == s->versions.end() || !it->second)
      return Status::Unavailable("model '" + model + "' version " + std::to_string(version) + " does not serve");
    const ModelStats& st = *it->second->stats();
    VersionCounters c;
    // The server's failures count against a version; a client's bad requests do not.
    c.errors = st.failure_count(FailureReason::kBackend) + st.failure_count(FailureReason::kTimeout) +
               st.failure_count(FailureReason::kOther);
    c.requests = st.success_count() + c.errors;
    c.latency_us = st.request_us().Take();
    c.shadow_agreed = st.shadow_agreed();
    c.shadow_disagreed = st.shadow_disagreed();
    return c;
  }
  std::vector<std::string> ModelNames() override { return m_->ModelNames(); }

 private:
  ModelManager* m_;
};

}  // namespace

RolloutService::RolloutService(ModelManager* manager, ControlStateStore* state, Clock* clock)
    : host_(std::make_unique<ManagerHost>(manager)),
      controller_(std::make_unique<RolloutController>(host_.get(), state, clock)),
      clock_(clock) {}

RolloutService::~RolloutService() { Stop(); }

void RolloutService::Start() {
  controller_->Resume();
  thread_ = std::thread([this] { Loop(); });
}

void RolloutService::Stop() {
  {
    MutexLock g(&mu_);
    stop_ = true;
  }
  cv_.NotifyAll();
  if (thread_.joinable()) thread_.join();
}

void RolloutService::Loop() {
  MutexLock lock(&mu_);
  while (!stop_) {
    cv_.WaitUntil(&mu_, clock_, clock_->Now() + std::chrono::seconds(1));
    if (stop_) break;
    lock.Unlock();  // the controller judges without this lock (it takes its own)
    controller_->Tick();
    lock.Lock();
  }
}

}  // namespace inferd
