#include "lifecycle/residency_policy.h"

#include <algorithm>
#include <tuple>

namespace inferd {

EvictionPlan PlanEvictions(std::vector<ResidentModel> resident, uint64_t budget, uint64_t used, uint64_t incoming,
                           TimePoint now, Duration min_residency) {
  EvictionPlan plan;
  if (budget == 0 || used + incoming <= budget) return plan;
  std::erase_if(resident,
                [&](const ResidentModel& m) { return m.pinned || m.busy || now - m.loaded_at < min_residency; });
  std::sort(resident.begin(), resident.end(), [](const ResidentModel& a, const ResidentModel& b) {
    const bool a_alone = !a.copies_elsewhere, b_alone = !b.copies_elsewhere;
    return std::tie(a_alone, a.last_used, b.bytes, a.name) < std::tie(b_alone, b.last_used, a.bytes, b.name);
  });
  const uint64_t need = used + incoming;
  auto after = [&] { return need > plan.freed ? need - plan.freed : 0; };
  for (const auto& m : resident) {
    if (after() <= budget) break;
    plan.victims.push_back(m.name);
    plan.freed += m.bytes;
  }
  plan.fits = after() <= budget;
  return plan;
}

}  // namespace inferd
