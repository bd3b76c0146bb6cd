// TrafficPolicy: how a model's requests that name no version are spread over
// its versions (canary, A/B) and which share of them is also run on another
// version (shadow). Pure data and pure functions: the routing policy applies
// it, the rollout controller writes it, the control-state store keeps it.
//
// Targets are version numbers ("3") or labels ("stable", "canary"). Only
// targets that serve (READY) get traffic; the weights of the others go to
// the rest in proportion. With a sticky key (a request parameter or header
// named by `sticky_key`), one key always reaches the same target while that
// target serves (weighted rendezvous hashing: a target that stops serving
// moves only its own keys); without one, each request draws at random.
//
// Thread-safety: pure functions; values are immutable once built.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace inferd {

struct TrafficSplit {
  std::string target;   // a version number or a label
  uint32_t weight = 0;  // percent; the weights of a policy sum to 100
};

struct TrafficPolicy {
  std::vector<TrafficSplit> split;  // empty: the default routing (default version)
  std::string sticky_key;           // "" = random per request
  std::string shadow_target;        // "" = no shadow
  double shadow_percent = 0;        // of the requests that reach split targets, 0..100

  bool empty() const { return split.empty() && shadow_target.empty(); }
};

// The API form: {"split": {"stable": 90, "canary": 10}, "sticky_key": "user_id",
// "shadow": {"target": "canary", "percent": 10}}; every field optional.
// INVALID_ARGUMENT names the field at fault (weights not summing to 100, a
// negative or fractional weight, a target twice, a percent outside 0..100,
// an unknown field).
Result<TrafficPolicy> ParseTrafficPolicyJson(std::string_view json);
std::string TrafficPolicyToJson(const TrafficPolicy& policy);

// The management API's answer: {"model": ..., "source": ..., "policy": <policy_json>}
// (policy_json is TrafficPolicyToJson's, or "{}").
std::string TrafficAnswerJson(const std::string& model, const std::string& source, const std::string& policy_json);

// The config.pbtxt form, parameters "traffic.split" ("stable=90,canary=10"),
// "traffic.sticky_key" ("user_id") and "traffic.shadow" ("canary=10", the
// percent mirrored). nullopt when none is given.
Result<std::optional<TrafficPolicy>> TrafficPolicyFromParameters(const std::map<std::string, std::string>& parameters);

// The split entry a request goes to: `serving[i]` says whether split[i]'s
// target serves now. `key`: the sticky key's value, if the request has one;
// else `random` (uniform in [0, 1)) decides. nullopt when no target serves.
std::optional<size_t> PickSplit(const TrafficPolicy& policy, const std::vector<bool>& serving,
                                std::optional<std::string_view> key, double random);

// Whether this request is also run on the shadow target (deterministic for a
// key, else `random` in [0, 1) against the percent).
bool PickShadow(const TrafficPolicy& policy, std::optional<std::string_view> key, double random);

}  // namespace inferd
