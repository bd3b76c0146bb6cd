#include <charconv>

#include "routing/routing_policy.h"

namespace inferd {

Result<VersionRef> VersionRef::Parse(std::string_view version) {
  VersionRef ref;
  if (version.empty()) return ref;
  int64_t n = 0;
  auto [p, ec] = std::from_chars(version.data(), version.data() + version.size(), n);
  if (ec != std::errc() || p != version.data() + version.size() || n < 1) {
    return Status::InvalidArgument("invalid model version '" + std::string(version) +
                                   "': versions are positive integers");
  }
  ref.kind = Kind::kNumber;
  ref.number = n;
  return ref;
}

VersionRef VersionRef::Label(std::string label) {
  VersionRef ref;
  ref.kind = Kind::kLabel;
  ref.label = std::move(label);
  return ref;
}

namespace {

class DefaultRoutingPolicy final : public RoutingPolicy {
 public:
  Result<Route> Resolve(const ServingModel& model, const VersionRef& ref, const InferRequest*) const override {
    int64_t v = model.default_version;
    if (ref.kind == VersionRef::Kind::kNumber) {
      v = ref.number;
    } else if (ref.kind == VersionRef::Kind::kLabel) {
      auto labelled = model.labels.Find(ref.label);
      if (!labelled) return Status::NotFound("model '" + model.name + "' has no label '" + ref.label + "'");
      v = *labelled;
    }
    auto it = model.versions.find(v);
    if (it == model.versions.end()) {
      return Status::NotFound("Request for unknown model: '" + model.name + "' version " + std::to_string(v) +
                              " is not found");
    }
    return Route{it->second, v, nullptr, 0};
  }
};

}  // namespace

std::unique_ptr<RoutingPolicy> MakeDefaultRoutingPolicy() { return std::make_unique<DefaultRoutingPolicy>(); }

}  // namespace inferd
