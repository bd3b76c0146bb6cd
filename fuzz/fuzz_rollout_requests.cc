// What operators send the rollout API: traffic policies (JSON and the
// config-parameter form) and rollout requests. A parsed policy must write
// back and re-parse to the same JSON; picks must stay within the split.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "lifecycle/rollout_plan.h"
#include "lifecycle/traffic_policy.h"
#include "server/rollout_controller.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto p = inferd::ParseTrafficPolicyJson(text); p.ok()) {
    const std::string json = inferd::TrafficPolicyToJson(*p);
    auto again = inferd::ParseTrafficPolicyJson(json);
    if (!again.ok() || inferd::TrafficPolicyToJson(*again) != json) std::abort();
    std::vector<bool> serving(p->split.size(), true);
    auto pick = inferd::PickSplit(*p, serving, text.substr(0, 8), 0.5);
    if (pick && *pick >= p->split.size()) std::abort();
    (void)inferd::PickShadow(*p, std::nullopt, 0.25);
  }
  (void)inferd::TrafficPolicyFromParameters(
      {{"traffic.split", std::string(text)}, {"traffic.shadow", std::string(text)}});
  if (auto r = inferd::ParseRolloutRequestJson(text); r.ok()) {
    if (!inferd::ValidateRolloutSpec(r->spec).ok()) std::abort();
    inferd::RolloutState s = inferd::StartRollout(r->spec, inferd::TimePoint{});
    s = inferd::JudgeInterval(s, inferd::IntervalStats{1000, 0, 1000, std::nullopt},
                              inferd::IntervalStats{1000, 0, 1000, std::nullopt}, inferd::TimePoint{});
    if (s.canary_percent() > 100) std::abort();
  }
  return 0;
}
