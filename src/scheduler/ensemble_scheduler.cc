#include "scheduler/ensemble_scheduler.h"

#include <algorithm>
#include <deque>
#include <vector>

#include "core/mutex.h"
#include "scheduler/durations.h"
#include "scheduler/ensemble_plan.h"

namespace inferd {
namespace {

// Ensembles whose plan is being checked on this thread: Describe may load a
// step's model, and a step naming one of these would wait for itself.
thread_local std::vector<std::string> t_loading;

class EnsembleScheduler;

// One request through the ensemble.
class Run : public std::enable_shared_from_this<Run> {
 public:
  Run(EnsembleScheduler* owner, std::unique_ptr<PendingRequest> pending);
  void Start();

 private:
  void Launch(const std::vector<int>& steps);
  void OnStep(int step, Result<InferResponse> result);
  void Finish();

  EnsembleScheduler* const owner_;
  const EnsemblePlan& plan_;
  std::unique_ptr<PendingRequest> pending_;
  Mutex mu_;
  std::vector<Tensor> values_ TSA_GUARDED_BY(mu_);
  std::vector<int> waiting_ TSA_GUARDED_BY(mu_);       // per step: tensors it still lacks
  std::vector<int> readers_left_ TSA_GUARDED_BY(mu_);  // per tensor
  size_t steps_left_ TSA_GUARDED_BY(mu_);
  int in_flight_ TSA_GUARDED_BY(mu_) = 0;
  Status error_ TSA_GUARDED_BY(mu_);
};

class EnsembleScheduler final : public Scheduler {
 public:
  EnsembleScheduler(SchedulerContext context, EnsemblePlan plan)
      : spec_(*context.spec),
        clock_(context.clock),
        stats_(std::move(context.stats)),
        submitter_(context.submitter),
        max_queue_(spec_.batching.queue.max_queue_size > 0 ? spec_.batching.queue.max_queue_size
                                                           : context.default_max_queue_size),
        plan_(std::move(plan)) {}
  ~EnsembleScheduler() override { Shutdown(); }

  Status Enqueue(std::unique_ptr<PendingRequest>& pending) override {
    {
      MutexLock l(&mu_);
      if (stopped_) return Status::Unavailable("model '" + spec_.name + "' is unloading");
      const uint32_t bound = spec_.ensemble->max_inflight;
      if (bound > 0 && running_ >= static_cast<int64_t>(bound)) {
        if (waiting_.size() >= max_queue_) {
          return Status::Unavailable("model '" + spec_.name + "': " + std::to_string(bound) +
                                     " requests in flight and the queue is full");
        }
        pending->enqueued = clock_->Now();
        if (stats_) stats_->AddPending(1);
        waiting_.push_back(std::move(pending));
        return Status::OK();
      }
      ++running_;
    }
    pending->enqueued = clock_->Now();
    if (stats_) stats_->AddPending(1);
    std::make_shared<Run>(this, std::move(pending))->Start();
    return Status::OK();
  }

  size_t QueueSize() const override {
    MutexLock l(&mu_);
    return waiting_.size();
  }

  void Shutdown() override {
    MutexLock l(&mu_);
    stopped_ = true;
    while (running_ > 0 || !waiting_.empty()) idle_.Wait(&mu_);
  }

  // A run ended: its answer was sent. Starts the next waiting request.
  void RunDone() {
    std::unique_ptr<PendingRequest> next;
    {
      MutexLock l(&mu_);
      if (!waiting_.empty()) {
        next = std::move(waiting_.front());
        waiting_.pop_front();
      } else {
        --running_;
        if (running_ == 0) idle_.NotifyAll();
        return;
      }
    }
    std::make_shared<Run>(this, std::move(next))->Start();
  }

  const ModelSpec& spec() const { return spec_; }
  const EnsemblePlan& plan() const { return plan_; }
  RequestSubmitter* submitter() const { return submitter_; }
  Clock* clock() const { return clock_; }
  ModelStats* stats() const { return stats_.get(); }

 private:
  const ModelSpec& spec_;
  Clock* const clock_;
  const std::shared_ptr<ModelStats> stats_;
  RequestSubmitter* const submitter_;
  const size_t max_queue_;
  const EnsemblePlan plan_;
  mutable Mutex mu_;
  CondVar idle_;
  bool stopped_ TSA_GUARDED_BY(mu_) = false;
  int64_t running_ TSA_GUARDED_BY(mu_) = 0;
  std::deque<std::unique_ptr<PendingRequest>> waiting_ TSA_GUARDED_BY(mu_);
};

Run::Run(EnsembleScheduler* owner, std::unique_ptr<PendingRequest> pending)
    : owner_(owner), plan_(owner->plan()), pending_(std::move(pending)) {
  MutexLock l(&mu_);
  values_.resize(plan_.tensors.size());
  readers_left_.resize(plan_.tensors.size());
  for (size_t t = 0; t < plan_.tensors.size(); ++t) readers_left_[t] = static_cast<int>(plan_.readers[t].size());
  waiting_.resize(plan_.steps.size());
  for (size_t i = 0; i < plan_.steps.size(); ++i) waiting_[i] = static_cast<int>(plan_.steps[i].reads.size());
  steps_left_ = plan_.steps.size();
}

void Run::Start() {
  std::vector<int> ready;
  {
    MutexLock l(&mu_);
    // Inputs are in the spec's order (validated before the enqueue).
    for (size_t i = 0; i < plan_.inputs.size() && i < pending_->request->inputs.size(); ++i) {
      const int t = plan_.inputs[i];
      values_[t] = std::move(pending_->request->inputs[i]);
      for (int r : plan_.readers[t])
        if (--waiting_[r] == 0) ready.push_back(r);
    }
    pending_->request->inputs.clear();
    in_flight_ += static_cast<int>(ready.size());
    if (ready.empty()) error_ = Status::Internal("ensemble '" + owner_->spec().name + "': no step can start");
  }
  if (ready.empty()) return Finish();
  Launch(ready);
}

// Submits `steps` (already counted in in_flight_).
void Run::Launch(const std::vector<int>& steps) {
  const InferRequest& req = *pending_->request;
  for (int i : steps) {
    const EnsemblePlan::Step& step = plan_.steps[i];
    auto r = std::make_unique<InferRequest>();
    r->model_name = step.model;
    r->model_version = step.version;
    r->id = req.id;
    r->parameters = req.parameters;
    r->cancellation = req.cancellation;
    r->trace = req.trace;  // traced: the step's model span is a child of the ensemble's
    {
      MutexLock l(&mu_);
      for (const auto& b : step.inputs) {
        Tensor t = values_[b.tensor];  // shares the buffer
        t.name = b.name;
        r->inputs.push_back(std::move(t));
      }
      for (int t : step.reads) {
        if (--readers_left_[t] > 0) continue;
        if (std::find(plan_.outputs.begin(), plan_.outputs.end(), t) == plan_.outputs.end()) values_[t] = Tensor();
      }
    }
    for (const auto& b : step.outputs) r->outputs.push_back(RequestedOutput{b.name});
    owner_->submitter()->Submit(std::move(r), [self = shared_from_this(), i](Result<InferResponse> result) {
      self->OnStep(i, std::move(result));
    });
  }
}

void Run::OnStep(int step, Result<InferResponse> result) {
  std::vector<int> ready;
  bool finished = false;
  {
    MutexLock l(&mu_);
    --in_flight_;
    --steps_left_;
    if (!result.ok()) {
      if (error_.ok()) {
        error_ = Status(result.status().code(), "ensemble '" + owner_->spec().name + "' " + plan_.StepName(step) +
                                                    ": " + result.status().message());
      }
    } else if (error_.ok()) {
      for (const auto& b : plan_.steps[step].outputs) {
        auto it = std::find_if(result->outputs.begin(), result->outputs.end(),
                               [&](const Tensor& t) { return t.name == b.name; });
        if (it == result->outputs.end()) {
          error_ = Status::Internal("ensemble '" + owner_->spec().name + "' " + plan_.StepName(step) +
                                    ": the model did not return output '" + b.name + "'");
          break;
        }
        values_[b.tensor] = std::move(*it);
        for (int r : plan_.readers[b.tensor])
          if (--waiting_[r] == 0) ready.push_back(r);
      }
    }
    if (!error_.ok()) ready.clear();
    in_flight_ += static_cast<int>(ready.size());
    finished = in_flight_ == 0 && (steps_left_ == 0 || !error_.ok());
  }
  if (finished) return Finish();
  Launch(ready);
}

void Run::Finish() {
  Result<InferResponse> answer = Status::OK();
  {
    MutexLock l(&mu_);
    if (error_.ok()) {
      InferResponse r;
      r.model_name = owner_->spec().name;
      r.model_version = pending_->request->model_version;
      r.id = pending_->request->id;
      const auto& wanted = pending_->request->outputs;
      for (size_t i = 0; i < plan_.outputs.size(); ++i) {
        const std::string& name = owner_->spec().outputs[i].name;
        if (!wanted.empty() &&
            std::none_of(wanted.begin(), wanted.end(), [&](const RequestedOutput& o) { return o.name == name; }))
          continue;
        Tensor t = values_[plan_.outputs[i]];
        t.name = name;
        r.outputs.push_back(std::move(t));
      }
      answer = std::move(r);
    } else {
      answer = error_;
    }
    values_.clear();
  }
  if (ModelStats* stats = owner_->stats()) {
    const TimePoint now = owner_->clock()->Now();
    if (answer.ok()) {
      // One run of the ensemble counts as one execution of its rows.
      stats->RecordExecution(static_cast<int>(pending_->rows), 0, Ns(now - pending_->enqueued), 0);
      stats->RecordSuccess(Ns(now - pending_->arrival), Ns(pending_->enqueued - pending_->arrival), 0,
                           Ns(now - pending_->enqueued), 0, WallMillis());
    } else {
      stats->RecordFailure(
          answer.status().code() == StatusCode::kCancelled ? FailureReason::kCancelled : FailureReason::kBackend,
          Ns(now - pending_->arrival));
    }
    stats->AddPending(-1);
  }
  pending_->callback(std::move(answer));
  owner_->RunDone();
}

// Pops the name pushed for the duration of a plan check.
struct LoadingScope {
  explicit LoadingScope(const std::string& name) { t_loading.push_back(name); }
  ~LoadingScope() { t_loading.pop_back(); }
};

}  // namespace

Result<std::unique_ptr<Scheduler>> MakeEnsembleScheduler(SchedulerContext context) {
  const ModelSpec& spec = *context.spec;
  INFERD_ASSIGN_OR_RETURN(EnsemblePlan plan, EnsemblePlan::Compile(spec));
  if (context.submitter == nullptr) return Status::Internal("an ensemble needs a request submitter");
  std::vector<ModelSpec> models;
  {
    LoadingScope scope(spec.name);
    for (size_t i = 0; i < plan.steps.size(); ++i) {
      const auto& step = plan.steps[i];
      if (std::find(t_loading.begin(), t_loading.end(), step.model) != t_loading.end()) {
        std::string chain;
        for (const auto& n : t_loading) chain += n + " -> ";
        return Status::InvalidArgument(plan.StepName(i) + ": ensembles call each other in a cycle: " + chain +
                                       step.model);
      }
      auto m = context.submitter->Describe(step.model, step.version);
      if (!m.ok()) {
        return Status::InvalidArgument(plan.StepName(i) + ": " + m.status().message());
      }
      models.push_back(std::move(*m));
    }
  }
  INFERD_RETURN_IF_ERROR(plan.Check(spec, models));
  return std::unique_ptr<Scheduler>(new EnsembleScheduler(std::move(context), std::move(plan)));
}

}  // namespace inferd
