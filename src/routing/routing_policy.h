// RoutingPolicy: resolves what a request names -- a model and a version
// number, a label, or nothing -- to the version that serves it, given the
// model's current ServingModel snapshot. The default policy (default version,
// numbered versions, labels) is the first implementation; traffic splitting
// (canary, A/B) and mirroring (shadow) are further implementations behind the
// same interface, so the request path does not change when they arrive.
//
// Thread-safety: Resolve is const and called concurrently from front-end
// threads; implementations keep any mutable state (counters, random state)
// thread-safe themselves.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "core/infer_request.h"
#include "core/status.h"
#include "manager/serving_model.h"

namespace inferd {

// What a request names as its version.
struct VersionRef {
  enum class Kind { kDefault, kNumber, kLabel };
  Kind kind = Kind::kDefault;
  int64_t number = 0;  // kNumber
  std::string label;   // kLabel

  // "" = default; a positive integer = that version; anything else is
  // INVALID_ARGUMENT (labels come through Label(), never from this string).
  static Result<VersionRef> Parse(std::string_view version);
  static VersionRef Label(std::string label);
};

// Where a request goes, and the version it is mirrored to (shadow), if any.
struct Route {
  std::shared_ptr<ModelVersion> version;
  int64_t version_number = 0;
  std::shared_ptr<ModelVersion> shadow;  // runs too; its answer is compared, never returned
  int64_t shadow_number = 0;
};

class RoutingPolicy {
 public:
  virtual ~RoutingPolicy() = default;
  // `request` is the request being routed, or null for metadata and
  // readiness calls (which must resolve the same way for the same ref).
  // Errors: NOT_FOUND for a version or label the model does not serve.
  virtual Result<Route> Resolve(const ServingModel& model, const VersionRef& ref,
                                const InferRequest* request) const = 0;
};

// Default version for unversioned requests, numbered versions as asked,
// labels through the snapshot's labels.
std::unique_ptr<RoutingPolicy> MakeDefaultRoutingPolicy();

// The default policy plus the snapshot's TrafficPolicy for requests that name
// no version: a weighted split among the targets that serve (sticky by the
// request parameter the policy names), and a shadow share. A request that
// names a version or label bypasses both. `random` draws uniformly in [0, 1)
// (thread-safe; injected by tests).
std::unique_ptr<RoutingPolicy> MakeTrafficRoutingPolicy(std::function<double()> random = nullptr);

}  // namespace inferd
