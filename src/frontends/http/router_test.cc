#include "frontends/http/router.h"

#include <gtest/gtest.h>

namespace inferd::http {
namespace {

using auth::Need;

TEST(RouteAccess, EveryRouteNeedsItsScopeAndNamesItsModel) {
  struct Case {
    const char* path;
    Need need;
    const char* model;
  };
  const Case cases[] = {
      {"/v2/health/live", Need::kHealth, ""},
      {"/v2/health/ready", Need::kHealth, ""},
      {"/v2", Need::kRead, ""},
      {"/v2/models/stats", Need::kRead, ""},
      {"/v2/models/m", Need::kRead, "m"},
      {"/v2/models/m/ready", Need::kRead, "m"},
      {"/v2/models/m/config", Need::kRead, "m"},
      {"/v2/models/m/stats", Need::kRead, "m"},
      {"/v2/models/m/versions/2/stats", Need::kRead, "m"},
      {"/v2/models/m/infer", Need::kInfer, "m"},
      {"/v2/models/m/versions/3/infer", Need::kInfer, "m"},
      {"/v2/models/m/labels/prod/infer", Need::kInfer, "m"},
      {"/v2/models/m/generate", Need::kInfer, "m"},
      {"/v2/models/m/generate_stream", Need::kInfer, "m"},
      {"/v2/models/infer", Need::kRead, "infer"},       // the metadata of a model named "infer"
      {"/v2/models/m/labels/infer", Need::kRead, "m"},  // ... of the version labelled "infer"
      {"/v2/models/m/versions/infer/infer", Need::kInfer, "m"},
      {"/v2/models/a%2Fb/infer", Need::kInfer, "a/b"},
      {"/v2/repository/index", Need::kModels, ""},
      {"/v2/repository/models", Need::kModels, ""},
      {"/v2/repository/models/m/load", Need::kModels, "m"},
      {"/v2/repository/models/m/labels/prod", Need::kModels, "m"},
      {"/v2/repository/models/m/traffic", Need::kModels, "m"},
      {"/v2/repository/models/m/rollout", Need::kModels, "m"},
      {"/v2/jobs", Need::kJobs, ""},
      {"/v2/jobs/j1", Need::kJobs, ""},
      {"/v2/cluster", Need::kCluster, ""},
      {"/v1/models/m", Need::kRead, "m"},
      {"/v1/models/m/metadata", Need::kRead, "m"},
      {"/v1/models/m:predict", Need::kInfer, "m"},
      {"/v1/models/m:classify", Need::kInfer, "m"},
      {"/v1/models/m/versions/2:predict", Need::kInfer, "m"},
      {"/v1/models/m/labels/prod:predict", Need::kInfer, "m"},
      {"/v1/chat/completions", Need::kInfer, ""},
      {"/v1/completions", Need::kInfer, ""},
      {"/v1/models", Need::kRead, ""},
      {"/", Need::kRead, ""},
      {"/nowhere/at/all", Need::kRead, ""},
  };
  for (const Case& c : cases) {
    const auto parts = SplitPath(c.path);  // AccessOf's model is a view into these
    const RouteAccess a = AccessOf(parts);
    EXPECT_EQ(a.need, c.need) << c.path << ": " << auth::NeedName(a.need);
    EXPECT_EQ(a.model, c.model) << c.path;
    const std::string_view p = c.path;
    EXPECT_EQ(a.openai, p == "/v1/chat/completions" || p == "/v1/completions" || p == "/v1/models") << c.path;
  }
}

}  // namespace
}  // namespace inferd::http
