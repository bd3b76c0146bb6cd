// RolloutPlan: the state machine of a progressive rollout (issue 15), pure.
//
// A rollout moves traffic from the stable target to a new version in steps
// (5%, 25%, 50%, 100%). At the end of each interval the controller hands it
// the canary's and stable's numbers over that interval; the plan then
// either waits (too few canary requests yet), fails a check and rolls back
// at once, advances to the next step, or, after the last, promotes the
// version. Every decision is recorded with the measured numbers.
//
// Thread-safety: values and pure functions; the controller serialises.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/clock.h"
#include "core/status.h"

namespace inferd {

struct RolloutChecks {
  // The canary's error rate may exceed stable's by at most this much (0.01 = one point).
  double max_error_rate_increase = 0.01;
  // The canary's p99 may be at most this multiple of stable's...
  double max_p99_ratio = 1.5;
  // ...or at most this much above it: the check fails only when over both (a
  // 1 ms model's p99 on a busy box moves by multiples, not by many ms). 0: the ratio alone.
  double min_p99_increase_ms = 0;
  // With shadowing: the least share of mirrored requests whose outputs agree.
  double min_agreement = 0.99;
};

struct RolloutSpec {
  std::string version;                          // the version rolled out ("4")
  std::vector<uint32_t> steps{5, 25, 50, 100};  // canary percent per step, ascending, last 100
  Duration interval = std::chrono::seconds(60);
  uint64_t min_requests = 100;  // canary requests an interval needs before it is judged
  RolloutChecks checks;
};

// What one target did over one interval.
struct IntervalStats {
  uint64_t requests = 0;
  uint64_t errors = 0;
  double p99_us = 0;
  std::optional<double> agreement;  // share of compared shadow outputs that agreed
};

enum class RolloutPhase { kRunning, kPromoted, kRolledBack, kAborted };
std::string_view RolloutPhaseName(RolloutPhase phase);

struct RolloutEvent {
  TimePoint at{};
  std::string what;  // "step 2: 25%", "rolled back: error rate 0.120 vs 0.010 (max +0.010)", "promoted"
};

struct RolloutState {
  RolloutSpec spec;
  RolloutPhase phase = RolloutPhase::kRunning;
  size_t step = 0;  // index into spec.steps while running
  TimePoint step_started{};
  std::string reason;  // why it ended (rolled back, aborted)
  std::vector<RolloutEvent> events;

  // The canary's share now: the step's percent while running, 100 once
  // promoted, 0 once rolled back or aborted.
  uint32_t canary_percent() const;
};

// INVALID_ARGUMENT for steps not ascending within 1..100 or not ending at 100,
// a non-positive interval, thresholds out of range.
Status ValidateRolloutSpec(const RolloutSpec& spec);

// A rollout starting now at its first step.
RolloutState StartRollout(RolloutSpec spec, TimePoint now);

// The interval that began at state.step_started has ended (now >= its end):
// judge it. A finished rollout is returned unchanged.
RolloutState JudgeInterval(RolloutState state, const IntervalStats& canary, const IntervalStats& stable, TimePoint now);

// The version left serving (removed from the repository, failed to load):
// the rollout ends with the canary at 0%.
RolloutState AbortRollout(RolloutState state, std::string why, TimePoint now);

}  // namespace inferd
