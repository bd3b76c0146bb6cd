// The traffic policy on the request path (routing_policy.h).
#include <charconv>
#include <random>

#include "routing/routing_policy.h"

namespace inferd {
namespace {

// A target (label or version number) to the version it names, if it serves.
std::optional<int64_t> ServingTarget(const ServingModel& model, const std::string& target) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(target.data(), target.data() + target.size(), v);
  if (ec != std::errc() || p != target.data() + target.size()) {
    auto labelled = model.labels.Find(target);
    if (!labelled) return std::nullopt;
    v = *labelled;
  }
  if (model.versions.count(v) == 0) return std::nullopt;
  return v;
}

// The request's sticky key: the transport's (a header), else the parameter the
// policy names, as text.
std::optional<std::string> StickyKey(const TrafficPolicy& policy, const InferRequest* request) {
  if (request == nullptr) return std::nullopt;
  if (!request->sticky_key.empty()) return request->sticky_key;
  if (policy.sticky_key.empty()) return std::nullopt;
  auto it = request->parameters.find(policy.sticky_key);
  if (it == request->parameters.end()) return std::nullopt;
  if (const std::string* s = std::get_if<std::string>(&it->second)) return *s;
  if (const int64_t* i = std::get_if<int64_t>(&it->second)) return std::to_string(*i);
  return std::nullopt;  // bools and doubles make poor user ids
}

double ThreadRandom() {
  thread_local std::mt19937_64 gen{std::random_device{}()};
  return std::uniform_real_distribution<double>(0.0, 1.0)(gen);
}

class TrafficRoutingPolicy final : public RoutingPolicy {
 public:
  explicit TrafficRoutingPolicy(std::function<double()> random)
      : fallback_(MakeDefaultRoutingPolicy()), random_(random ? std::move(random) : ThreadRandom) {}

  Result<Route> Resolve(const ServingModel& model, const VersionRef& ref, const InferRequest* request) const override {
    const TrafficPolicy* policy = model.traffic.get();
    // Explicit addressing bypasses the policy; metadata calls (no request) see the default.
    if (policy == nullptr || ref.kind != VersionRef::Kind::kDefault || request == nullptr || policy->empty())
      return fallback_->Resolve(model, ref, request);
    const std::optional<std::string> sticky = StickyKey(*policy, request);
    const std::optional<std::string_view> key = sticky ? std::optional<std::string_view>(*sticky) : std::nullopt;
    Route route;
    if (!policy->split.empty()) {
      std::vector<bool> serving(policy->split.size());
      std::vector<int64_t> numbers(policy->split.size(), 0);
      for (size_t i = 0; i < policy->split.size(); ++i) {
        auto v = ServingTarget(model, policy->split[i].target);
        serving[i] = v.has_value();
        if (v) numbers[i] = *v;
      }
      auto pick = PickSplit(*policy, serving, key, random_());
      if (!pick) return fallback_->Resolve(model, ref, request);  // no target serves: the default version
      route.version_number = numbers[*pick];
      route.version = model.versions.at(route.version_number);
    } else {
      INFERD_ASSIGN_OR_RETURN(route, fallback_->Resolve(model, ref, request));
    }
    if (!policy->shadow_target.empty() && PickShadow(*policy, key, random_())) {
      auto v = ServingTarget(model, policy->shadow_target);
      if (v && *v != route.version_number) {
        route.shadow_number = *v;
        route.shadow = model.versions.at(*v);
      }
    }
    return route;
  }

 private:
  std::unique_ptr<RoutingPolicy> fallback_;
  std::function<double()> random_;
};

}  // namespace

std::unique_ptr<RoutingPolicy> MakeTrafficRoutingPolicy(std::function<double()> random) {
  return std::make_unique<TrafficRoutingPolicy>(std::move(random));
}

}  // namespace inferd
