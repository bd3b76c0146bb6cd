// RolloutController: progressive rollouts with automatic rollback (issue 15).
//
// `inferd rollout MODEL --to VERSION` (or the API) starts one: the version is
// labelled `canary` (loading it first), `stable` is the model's current
// default (labelled if it was not), and the traffic policy sends the first
// step's share to the canary. At the end of each interval the controller
// reads both targets' statistics over that interval (requests, errors, p99,
// and shadow agreement when the rollout shadows), lets the RolloutPlan judge
// them (lifecycle/rollout_plan.h) and applies the verdict: the next step's
// split; a rollback (canary 0%, stable stays default); or the promotion
// (`stable` -> the version, the split removed). When it ends either way the
// `canary` label is removed (a rolled-back version then unloads unless the
// version_policy or another label keeps it). A version that stops serving
// ends the rollout at the next tick, without waiting for the interval. Every
// decision is logged with its numbers, counted in metrics and kept in the
// rollout's history.
//
// State lives in the control-state store (document "rollout" per model), so
// a restart resumes a running rollout at its step with a fresh interval.
// Many models can roll out at once; each is independent.
//
// Thread-safety: all public methods are thread-safe. Tick() is called by the
// server's timer thread (or a test, with a FakeClock); host calls happen
// outside the lock that guards the state (Get and All never wait for them),
// one rollout operation at a time.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/mutex.h"
#include "lifecycle/control_state_store.h"
#include "lifecycle/rollout_plan.h"
#include "lifecycle/traffic_policy.h"
#include "metrics/histogram.h"

namespace inferd {

// Cumulative counters of one version (differences over an interval make its
// IntervalStats).
struct VersionCounters {
  uint64_t requests = 0;  // completed: successes + failures
  uint64_t errors = 0;
  Histogram::Snapshot latency_us;  // successful requests
  uint64_t shadow_agreed = 0, shadow_disagreed = 0;
};

// What the controller needs from the server (narrow, so tests fake it).
class RolloutHost {
 public:
  virtual ~RolloutHost() = default;
  virtual Result<int64_t> DefaultVersion(const std::string& model) = 0;
  // The version `label` points at (NOT_FOUND when none).
  virtual Result<int64_t> LabelVersion(const std::string& model, const std::string& label) = 0;
  // Loads `version` first when it does not serve (may block: called on the admin path).
  virtual Status SetLabel(const std::string& model, const std::string& label, int64_t version) = 0;
  // Removes a label (a version no label or policy keeps unloads).
  virtual Status DeleteLabel(const std::string& model, const std::string& label) = 0;
  virtual Status SetTraffic(const std::string& model, const TrafficPolicy& policy) = 0;
  virtual Status ClearTraffic(const std::string& model) = 0;
  // Counters of a serving version (UNAVAILABLE when it no longer serves).
  virtual Result<VersionCounters> Counters(const std::string& model, int64_t version) = 0;
  virtual std::vector<std::string> ModelNames() = 0;
};

struct RolloutRequest {
  RolloutSpec spec;
  double shadow_percent = 0;  // also mirror this share of stable's requests to the canary
};

// IntervalStats of `now` minus `before` (p99 interpolated within the
// histogram's buckets; agreement when shadow comparisons happened).
IntervalStats Difference(const VersionCounters& before, const VersionCounters& now);

// The API's JSON form: {"version": "4", "steps": [5, 25, 50, 100], "interval_seconds": 60,
// "min_requests": 100, "shadow_percent": 0, "checks": {"max_error_rate_increase": 0.01,
// "max_p99_ratio": 1.5, "min_agreement": 0.99}}; INVALID_ARGUMENT names the field at fault.
Result<RolloutRequest> ParseRolloutRequestJson(std::string_view json);
std::string RolloutStateToJson(const std::string& model, const RolloutState& state);

class RolloutController {
 public:
  RolloutController(RolloutHost* host, ControlStateStore* state, Clock* clock);

  // Starts a rollout of `model` (FAILED_PRECONDITION when one runs).
  Result<RolloutState> Start(const std::string& model, RolloutRequest request);
  Result<RolloutState> Get(const std::string& model) const;
  // Every model's rollout, running or the last one ended, by model name.
  std::map<std::string, RolloutState> All() const;
  // Ends a running rollout: the canary gets 0%.
  Result<RolloutState> Abort(const std::string& model, const std::string& why);
  // Judges every rollout whose interval has ended.
  void Tick();
  // Reads the persisted rollouts (at start-up): running ones resume at their
  // step with a fresh interval.
  void Resume();

  struct Counts {
    uint64_t started = 0, promoted = 0, rolled_back = 0, aborted = 0;
  };
  Counts counts() const;

 private:
  struct Running {
    RolloutState state;
    double shadow_percent = 0;
    int64_t stable = 0, canary = 0;        // versions
    VersionCounters stable_at, canary_at;  // at the interval's start
  };
  Status Apply(const std::string& model, const Running& r);
  void Persist(const std::string& model, const RolloutState& state);
  void Finished(RolloutPhase phase);

  RolloutHost* const host_;
  ControlStateStore* const store_;
  Clock* const clock_;
  // Serialises Start, Abort, Tick and Resume: a verdict's host calls (labels,
  // traffic) never interleave with another's, so an abort cannot be undone
  // by a step applied after it. Held across host calls (a Start may load a
  // version); mu_ only guards the maps.
  Mutex apply_mu_ TSA_ACQUIRED_BEFORE(mu_);
  mutable Mutex mu_;
  std::map<std::string, Running> running_ TSA_GUARDED_BY(mu_);
  std::map<std::string, RolloutState> finished_ TSA_GUARDED_BY(mu_);  // the last one per model
  Counts counts_ TSA_GUARDED_BY(mu_);
};

}  // namespace inferd
