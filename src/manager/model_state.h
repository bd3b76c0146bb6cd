// The explicit lifecycle state of a model and of each of its versions, with
// the reason kept as data, and the one function that moves them.
//
//   LOADING      a load of it is running (on demand: queued or running)
//   READY        serving requests
//   UNLOADING    retired: draining its accepted requests, takes no new ones
//   UNAVAILABLE  not loaded: never asked for, unloaded, or not resident yet
//                (on-demand residency loads it on its first request)
//   FAILED       its last load failed; the reason says why
//   EVICTED      unloaded to stay within the memory budget (loads again on
//                its next request)
//
// The ModelManager stores one state per model and one per version and
// changes them only through ModelTransition / VersionTransition: a move the
// tables below do not allow is a bug, reported as INTERNAL (and logged) rather
// than stored. Listings, metrics and the repository index read the stored
// states; nothing derives a state from which container holds a version.
//
// A version keeps one entry per number. A reload of a serving version keeps
// it READY while the new snapshot loads (the old one serves), and the
// snapshots it replaced drain in the background: `kDrained` then leaves a
// LOADING, READY or FAILED version as it is, and ends an UNLOADING one.
//
// Triton's repository index knows only READY, UNAVAILABLE, LOADING and
// UNLOADING: FAILED and EVICTED are shown there as UNAVAILABLE with their
// reason (WireName).
//
// Thread-safety: plain values and pure functions.
#pragma once

#include <string>

#include "core/status.h"

namespace inferd {

enum class ModelState { kLoading, kReady, kUnloading, kUnavailable, kFailed, kEvicted };
inline constexpr ModelState kAllModelStates[] = {ModelState::kLoading,     ModelState::kReady,  ModelState::kUnloading,
                                                 ModelState::kUnavailable, ModelState::kFailed, ModelState::kEvicted};

// What happens to a model or a version.
enum class LifecycleEvent {
  kLoadStarted,    // a load (or a reload) of it began
  kLoadSucceeded,  // it loaded (a model: at least one of its versions serves)
  kLoadFailed,     // its load failed (a model: its config did not load, or no version serves)
  kUnloadStarted,  // a caller unloaded it (a version: also replaced by none): it drains
  kEvictStarted,   // unloaded to stay within the memory budget: it drains
  kDrained,        // the last accepted request of what it was draining finished
  kIndexed,        // on demand: recorded as a repository model that is not resident
};
inline constexpr LifecycleEvent kAllLifecycleEvents[] = {LifecycleEvent::kLoadStarted,  LifecycleEvent::kLoadSucceeded,
                                                         LifecycleEvent::kLoadFailed,   LifecycleEvent::kUnloadStarted,
                                                         LifecycleEvent::kEvictStarted, LifecycleEvent::kDrained,
                                                         LifecycleEvent::kIndexed};

// "LOADING", "READY", ... as listed above.
const char* StateName(ModelState state);
// The state as Triton-compatible APIs show it.
const char* WireName(ModelState state);
const char* EventName(LifecycleEvent event);

// A state and why the model (version) is in it; `reason` is empty for READY
// unless a reload failed while an older snapshot kept serving.
struct StateInfo {
  ModelState state = ModelState::kUnavailable;
  std::string reason;
};

// The model-level table:
//   UNAVAILABLE  LoadStarted -> LOADING, LoadFailed -> FAILED (its config does
//                not load), UnloadStarted -> UNAVAILABLE, Indexed -> UNAVAILABLE
//   LOADING      LoadSucceeded -> READY, LoadFailed -> FAILED
//   READY        LoadStarted, LoadSucceeded, LoadFailed -> READY (a reload; what
//                serves keeps serving), UnloadStarted -> UNLOADING,
//                EvictStarted -> EVICTED (its versions drain)
//   UNLOADING    Drained -> UNAVAILABLE
//   FAILED       LoadStarted -> LOADING, LoadFailed -> FAILED,
//                UnloadStarted -> UNAVAILABLE, Indexed -> FAILED
//   EVICTED      LoadStarted -> LOADING, LoadFailed -> FAILED,
//                UnloadStarted -> UNAVAILABLE, Indexed -> EVICTED
// INTERNAL for every other pair.
Result<ModelState> ModelTransition(ModelState from, LifecycleEvent event);

// The version-level table (a version that has no entry is UNAVAILABLE):
//   UNAVAILABLE  LoadStarted -> LOADING
//   LOADING      LoadSucceeded -> READY, LoadFailed -> FAILED, Drained -> LOADING
//   READY        LoadStarted, LoadSucceeded, LoadFailed -> READY (a replacement
//                snapshot loads, swaps in, or fails while this one serves),
//                UnloadStarted, EvictStarted -> UNLOADING, Drained -> READY
//   UNLOADING    LoadStarted -> LOADING (loaded again while the old snapshot
//                drains), Drained -> UNAVAILABLE (its entry goes)
//   FAILED       LoadStarted -> LOADING, UnloadStarted -> UNAVAILABLE,
//                Drained -> FAILED
// INTERNAL for every other pair (EVICTED is a model-level state only).
Result<ModelState> VersionTransition(ModelState from, LifecycleEvent event);

}  // namespace inferd
