// The explicit lifecycle state of a model version (and of a model with no
// serving version), with the reason kept as data.
//
//   LOADING      a load (or on-demand load) of it is queued or running
//   READY        serving requests
//   UNLOADING    retired: draining its accepted requests, takes no new ones
//   UNAVAILABLE  not loaded: never asked for, unloaded, or not resident yet
//                (on-demand residency loads it on its first request)
//   FAILED       its last load failed; the reason says why
//   EVICTED      unloaded to stay within the memory budget (loads again on
//                its next request)
//
// Triton's repository index knows only READY, UNAVAILABLE, LOADING and
// UNLOADING: FAILED and EVICTED are shown there as UNAVAILABLE with their
// reason (WireName).
#pragma once

#include <string>

namespace inferd {

enum class ModelState { kLoading, kReady, kUnloading, kUnavailable, kFailed, kEvicted };

// "LOADING", "READY", ... as listed above.
const char* StateName(ModelState state);
// The state as Triton-compatible APIs show it.
const char* WireName(ModelState state);

// A state and why the model (version) is in it; `reason` is empty for READY.
struct StateInfo {
  ModelState state = ModelState::kUnavailable;
  std::string reason;
};

}  // namespace inferd
