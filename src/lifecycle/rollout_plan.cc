#include "lifecycle/rollout_plan.h"

#include <cmath>
#include <cstdio>

namespace inferd {
namespace {

template <typename... Args>
std::string Fmt(const char* format, Args... args) {
  char buf[160];
  std::snprintf(buf, sizeof(buf), format, args...);
  return buf;
}

double ErrorRate(const IntervalStats& s) {
  return s.requests == 0 ? 0.0 : static_cast<double>(s.errors) / static_cast<double>(s.requests);
}

RolloutState End(RolloutState state, RolloutPhase phase, std::string why, TimePoint now) {
  state.phase = phase;
  state.reason = why;
  state.events.push_back({now, std::string(RolloutPhaseName(phase)) + (why.empty() ? "" : ": " + why)});
  return state;
}

}  // namespace

std::string_view RolloutPhaseName(RolloutPhase phase) {
  switch (phase) {
    case RolloutPhase::kRunning:
      return "running";
    case RolloutPhase::kPromoted:
      return "promoted";
    case RolloutPhase::kRolledBack:
      return "rolled back";
    case RolloutPhase::kAborted:
      return "aborted";
  }
  return "unknown";
}

uint32_t RolloutState::canary_percent() const {
  switch (phase) {
    case RolloutPhase::kRunning:
      return step < spec.steps.size() ? spec.steps[step] : 0;
    case RolloutPhase::kPromoted:
      return 100;
    default:
      return 0;
  }
}

Status ValidateRolloutSpec(const RolloutSpec& s) {
  if (s.version.empty()) return Status::InvalidArgument("rollout: no version to roll out");
  if (s.steps.empty() || s.steps.back() != 100)
    return Status::InvalidArgument("rollout: 'steps' must end at 100 (the version takes all traffic)");
  uint32_t last = 0;
  for (uint32_t p : s.steps) {
    if (p <= last || p > 100)
      return Status::InvalidArgument("rollout: 'steps' must rise strictly within 1..100, not " + std::to_string(p) +
                                     " after " + std::to_string(last));
    last = p;
  }
  if (s.interval <= Duration::zero()) return Status::InvalidArgument("rollout: 'interval' must be positive");
  const RolloutChecks& c = s.checks;
  if (!(c.max_error_rate_increase >= 0 && c.max_error_rate_increase <= 1))
    return Status::InvalidArgument("rollout: 'max_error_rate_increase' must be in 0..1");
  if (!(c.max_p99_ratio >= 1) || !std::isfinite(c.max_p99_ratio))
    return Status::InvalidArgument("rollout: 'max_p99_ratio' must be a number >= 1");
  if (!(c.min_p99_increase_ms >= 0) || !std::isfinite(c.min_p99_increase_ms))
    return Status::InvalidArgument("rollout: 'min_p99_increase_ms' must be a number >= 0");
  if (!(c.min_agreement >= 0 && c.min_agreement <= 1))
    return Status::InvalidArgument("rollout: 'min_agreement' must be in 0..1");
  return Status::OK();
}

RolloutState StartRollout(RolloutSpec spec, TimePoint now) {
  RolloutState s;
  s.spec = std::move(spec);
  s.step_started = now;
  s.events.push_back({now, "step 1: " + std::to_string(s.canary_percent()) + "%"});
  return s;
}

RolloutState JudgeInterval(RolloutState state, const IntervalStats& canary, const IntervalStats& stable,
                           TimePoint now) {
  if (state.phase != RolloutPhase::kRunning) return state;
  const RolloutChecks& c = state.spec.checks;
  // Checks that fail whatever the count: a canary that errs or disagrees
  // more than allowed is rolled back without waiting for a full sample.
  const double canary_errors = ErrorRate(canary), stable_errors = ErrorRate(stable);
  if (canary.requests > 0 && canary_errors > stable_errors + c.max_error_rate_increase &&
      canary.errors >= std::max<uint64_t>(1, state.spec.min_requests / 20)) {
    return End(
        std::move(state), RolloutPhase::kRolledBack,
        Fmt("error rate %.3f vs stable %.3f (max +%.3f)", canary_errors, stable_errors, c.max_error_rate_increase),
        now);
  }
  if (canary.agreement && *canary.agreement < c.min_agreement) {
    return End(std::move(state), RolloutPhase::kRolledBack,
               Fmt("outputs agree on %.3f of compared requests (min %.3f)", *canary.agreement, c.min_agreement), now);
  }
  if (canary.requests < state.spec.min_requests) {
    state.events.push_back({now, "waiting: " + std::to_string(canary.requests) + " of " +
                                     std::to_string(state.spec.min_requests) + " canary requests"});
    state.step_started = now;  // the next interval judges what comes next, with the same step
    return state;
  }
  // Latency is compared only within one interval: canary and stable
  // measured over the same seconds, under the same machine load. A p99 of
  // stable from an earlier step is no baseline (a good canary was rolled
  // back once under machine noise that way). Where stable had too few
  // requests of its own (high canary shares; 100%: none), the step's p99 is
  // not judged; the lower steps judged it with both measured.
  if (stable.requests >= state.spec.min_requests && stable.p99_us > 0) {
    if (canary.p99_us > stable.p99_us * c.max_p99_ratio &&
        canary.p99_us - stable.p99_us > c.min_p99_increase_ms * 1000) {
      std::string why = Fmt("p99 %.0f us vs stable %.0f us in the same interval (max x%.2f", canary.p99_us,
                            stable.p99_us, c.max_p99_ratio);
      if (c.min_p99_increase_ms > 0) why += Fmt(" or +%.1f ms", c.min_p99_increase_ms);
      return End(std::move(state), RolloutPhase::kRolledBack, why + ")", now);
    }
  } else {
    state.events.push_back({now, "p99 not compared: stable had " + std::to_string(stable.requests) + " of " +
                                     std::to_string(state.spec.min_requests) + " requests in the interval"});
  }
  if (state.step + 1 >= state.spec.steps.size()) return End(std::move(state), RolloutPhase::kPromoted, "", now);
  ++state.step;
  state.step_started = now;
  state.events.push_back(
      {now, "step " + std::to_string(state.step + 1) + ": " + std::to_string(state.canary_percent()) + "%"});
  return state;
}

RolloutState AbortRollout(RolloutState state, std::string why, TimePoint now) {
  if (state.phase != RolloutPhase::kRunning) return state;
  return End(std::move(state), RolloutPhase::kAborted, std::move(why), now);
}

}  // namespace inferd
