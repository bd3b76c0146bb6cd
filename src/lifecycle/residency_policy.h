// Residency policy for on-demand models: which resident models to evict so
// that an incoming model fits a memory budget. A pure function of its
// inputs (sizes, times, flags), so it is tested with fake clocks and sizes;
// the server gathers the inputs and does the unloading.
//
// Rules, in order:
//  * nothing is evicted while used + incoming <= budget (budget 0 = none);
//  * never evicted: pinned models, busy models (requests queued or running),
//    models resident for less than `min_residency` (stops thrashing);
//  * among the rest, first the models with a copy on another node (cluster
//    mode: the cheaper victims, their requests go there), then the others;
//    in each group least recently used first (ties: larger first, then name),
//    until used + incoming - freed <= budget.
// When the evictable models are not enough, `fits` is false and the caller
// decides (inferd loads anyway and counts an over-budget load).
//
// Thread-safety: pure function.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/clock.h"

namespace inferd {

struct ResidentModel {
  std::string name;
  uint64_t bytes = 0;
  TimePoint last_used;  // last request routed to it (or its load)
  TimePoint loaded_at;
  bool pinned = false;
  bool busy = false;
  bool copies_elsewhere = false;  // cluster mode: another live node holds it
};

struct EvictionPlan {
  std::vector<std::string> victims;  // in eviction order
  uint64_t freed = 0;
  bool fits = true;  // used + incoming - freed <= budget
};

EvictionPlan PlanEvictions(std::vector<ResidentModel> resident, uint64_t budget, uint64_t used, uint64_t incoming,
                           TimePoint now, Duration min_residency);

}  // namespace inferd
