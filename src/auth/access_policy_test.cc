#include "auth/access_policy.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "testing/fake_clock.h"

namespace inferd::auth {
namespace {

constexpr const char* kInferToken = "infer-token-0123456789";
constexpr const char* kOpsToken = "ops-token-0123456789ab";
constexpr const char* kFraudToken = "fraud-token-0123456789";

class AccessPolicyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = std::filesystem::temp_directory_path() /
            ("inferd_tokens_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".json");
  }
  void TearDown() override { std::filesystem::remove(path_); }

  void Write(const std::string& text) { std::ofstream(path_) << text; }
  std::unique_ptr<AccessPolicy> Policy(AccessOptions o) {
    auto p = AccessPolicy::Create(std::move(o), &clock_);
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    return p.ok() ? std::move(*p) : nullptr;
  }
  std::unique_ptr<AccessPolicy> FromFile(bool all_routes = false) {
    Write(std::string(R"({"tokens": [
      {"name": "app", "token": ")") +
          kInferToken + R"(", "scopes": ["infer", "read"]},
      {"name": "ops", "token": ")" +
          kOpsToken + R"(", "scopes": ["*"]},
      {"name": "fraud", "token": ")" +
          kFraudToken + R"(", "scopes": ["infer"], "models": ["fraud", "fraud-*"], "requests_per_second": 2}]})");
    AccessOptions o;
    o.tokens_file = path_.string();
    o.all_routes = all_routes;
    return Policy(std::move(o));
  }
  static std::string Bearer(const char* token) { return std::string("Bearer ") + token; }

  testing::FakeClock clock_;
  std::filesystem::path path_;
};

TEST_F(AccessPolicyTest, WithoutTokensEveryRouteIsOpen) {
  auto p = Policy({});
  EXPECT_FALSE(p->enabled());
  for (Need n : {Need::kHealth, Need::kInfer, Need::kRead, Need::kModels, Need::kJobs, Need::kCluster}) {
    EXPECT_FALSE(p->Protects(n));
    EXPECT_TRUE(p->Check("", n, "m").ok());
  }
}

TEST_F(AccessPolicyTest, TheAdminTokenAloneProtectsManagementRoutes) {
  auto p = Policy({"s3cret", "", false});
  EXPECT_TRUE(p->Check("", Need::kInfer).ok());  // inference, metadata, health: unaffected
  EXPECT_TRUE(p->Check("", Need::kRead).ok());
  EXPECT_TRUE(p->Check("", Need::kHealth).ok());
  for (Need n : {Need::kModels, Need::kJobs, Need::kCluster}) {
    EXPECT_TRUE(p->Check("Bearer s3cret", n, "any").ok());
    const Status missing = p->Check("", n);
    EXPECT_EQ(missing.code(), StatusCode::kUnauthenticated);
    EXPECT_EQ(missing.message(), "management routes need a bearer token (Authorization: Bearer <token>)");
  }
  for (const char* bad : {"Bearer s3cre", "Bearer s3cret2", "bearer s3cret", "s3cret", "Bearer ", "Basic czNjcmV0"}) {
    EXPECT_EQ(p->Check(bad, Need::kModels).code(), StatusCode::kUnauthenticated) << bad;
    EXPECT_EQ(p->Check(bad, Need::kModels).message(), "invalid bearer token") << bad;
  }
  EXPECT_EQ(p->counters().unauthenticated, 3u + 6u * 2u);
}

TEST_F(AccessPolicyTest, AllRoutesProtectsInferenceMetadataAndHealthToo) {
  auto p = Policy({"t", "", true});
  for (Need n : {Need::kHealth, Need::kInfer, Need::kRead}) {
    EXPECT_EQ(p->Check("", n).code(), StatusCode::kUnauthenticated);
    EXPECT_EQ(p->Check("", n).message(), "this server's routes need a bearer token (Authorization: Bearer <token>)");
    EXPECT_TRUE(p->Check("Bearer t", n).ok());
  }
}

TEST_F(AccessPolicyTest, ATokensFileProtectsEveryRouteButHealthByScope) {
  auto p = FromFile();
  EXPECT_TRUE(p->Check("", Need::kHealth).ok());
  EXPECT_EQ(p->Check("", Need::kInfer).code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(p->Check("", Need::kRead).code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(p->Check("Bearer not-a-known-token-at-all", Need::kInfer).code(), StatusCode::kUnauthenticated);

  // app: infer and read, nothing else.
  EXPECT_TRUE(p->Check(Bearer(kInferToken), Need::kInfer, "any").ok());
  EXPECT_TRUE(p->Check(Bearer(kInferToken), Need::kRead, "any").ok());
  for (Need n : {Need::kModels, Need::kJobs, Need::kCluster}) {
    const Status st = p->Check(Bearer(kInferToken), n);
    EXPECT_EQ(st.code(), StatusCode::kPermissionDenied);
    EXPECT_EQ(st.message(), "this token does not have the '" + std::string(NeedName(n)) + "' scope this route needs");
  }
  // ops: everything.
  for (Need n : {Need::kHealth, Need::kInfer, Need::kRead, Need::kModels, Need::kJobs, Need::kCluster}) {
    EXPECT_TRUE(p->Check(Bearer(kOpsToken), n, "x").ok());
  }
  EXPECT_EQ(p->counters().permission_denied, 3u);
}

TEST_F(AccessPolicyTest, AModelRestrictedTokenReachesOnlyItsModels) {
  auto p = FromFile();
  EXPECT_TRUE(p->Check(Bearer(kFraudToken), Need::kInfer, "fraud").ok());
  clock_.Advance(std::chrono::seconds(1));
  EXPECT_TRUE(p->Check(Bearer(kFraudToken), Need::kInfer, "fraud-eu").ok());
  clock_.Advance(std::chrono::seconds(1));
  EXPECT_TRUE(p->Check(Bearer(kFraudToken), Need::kInfer).ok());  // a route that names no model
  for (const char* other : {"fraudulent", "fraud_x", "credit", "Fraud"}) {
    const Status st = p->Check(Bearer(kFraudToken), Need::kInfer, other);
    EXPECT_EQ(st.code(), StatusCode::kPermissionDenied) << other;
    EXPECT_EQ(st.message(), "this token may not use this model");
    EXPECT_EQ(p->CheckModel(Bearer(kFraudToken), Need::kInfer, other).code(), StatusCode::kPermissionDenied);
  }
  EXPECT_TRUE(p->CheckModel(Bearer(kFraudToken), Need::kInfer, "fraud-us").ok());
  EXPECT_TRUE(p->CheckModel(Bearer(kOpsToken), Need::kInfer, "credit").ok());
  // The scope comes first: a read route is refused whatever model it names.
  EXPECT_EQ(p->Check(Bearer(kFraudToken), Need::kRead, "fraud").code(), StatusCode::kPermissionDenied);
}

TEST_F(AccessPolicyTest, ATokenOverItsRateIsRefusedUntilTimeRefillsIt) {
  auto p = FromFile();
  // requests_per_second 2: a burst of two, then one more every half second.
  EXPECT_TRUE(p->Check(Bearer(kFraudToken), Need::kInfer, "fraud").ok());
  EXPECT_TRUE(p->Check(Bearer(kFraudToken), Need::kInfer, "fraud").ok());
  const Status over = p->Check(Bearer(kFraudToken), Need::kInfer, "fraud");
  EXPECT_EQ(over.code(), StatusCode::kRateLimited);
  EXPECT_EQ(over.message(), "this token is over its request rate (requests_per_second 2)");
  EXPECT_TRUE(p->Check(Bearer(kOpsToken), Need::kInfer, "fraud").ok());  // others are not limited by it
  clock_.Advance(std::chrono::milliseconds(500));
  EXPECT_TRUE(p->Check(Bearer(kFraudToken), Need::kInfer, "fraud").ok());
  EXPECT_EQ(p->Check(Bearer(kFraudToken), Need::kInfer, "fraud").code(), StatusCode::kRateLimited);
  clock_.Advance(std::chrono::seconds(10));  // the bucket holds a second's worth, no more
  EXPECT_TRUE(p->Check(Bearer(kFraudToken), Need::kInfer, "fraud").ok());
  EXPECT_TRUE(p->Check(Bearer(kFraudToken), Need::kInfer, "fraud").ok());
  EXPECT_EQ(p->Check(Bearer(kFraudToken), Need::kInfer, "fraud").code(), StatusCode::kRateLimited);
  EXPECT_EQ(p->counters().rate_limited, 3u);
}

TEST_F(AccessPolicyTest, AReloadSwapsTheTokensAndABadFileKeepsTheOldOnes) {
  auto p = FromFile();
  ASSERT_TRUE(p->Check(Bearer(kInferToken), Need::kInfer).ok());
  Write(std::string(R"({"tokens": [{"name": "new", "token": "brand-new-token-0123", "scopes": ["read"]}]})"));
  ASSERT_TRUE(p->Reload().ok());
  EXPECT_EQ(p->Check(Bearer(kInferToken), Need::kInfer).code(), StatusCode::kUnauthenticated);
  EXPECT_TRUE(p->Check("Bearer brand-new-token-0123", Need::kRead).ok());

  Write("{\"tokens\": [");  // cut off mid-write: refused, the tokens in use stay
  const Status bad = p->Reload();
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("the tokens file " + path_.string() + ": not JSON"), std::string::npos) << bad.message();
  EXPECT_TRUE(p->Check("Bearer brand-new-token-0123", Need::kRead).ok());
  std::filesystem::remove(path_);
  EXPECT_FALSE(p->Reload().ok());
  EXPECT_TRUE(p->Check("Bearer brand-new-token-0123", Need::kRead).ok());
  EXPECT_EQ(p->counters().reloads, 1u);
  EXPECT_EQ(p->counters().reload_failures, 2u);
}

TEST_F(AccessPolicyTest, TheAdminTokenJoinsTheTokensFileWithEveryScope) {
  Write(std::string(R"({"tokens": [{"name": "app", "token": ")") + kInferToken + R"(", "scopes": ["infer"]}]})");
  auto p = Policy({"admin-secret", path_.string(), false});
  EXPECT_TRUE(p->Check("Bearer admin-secret", Need::kModels, "m").ok());
  EXPECT_TRUE(p->Check("Bearer admin-secret", Need::kRead).ok());
  EXPECT_TRUE(p->Check(Bearer(kInferToken), Need::kInfer).ok());
  EXPECT_EQ(p->Check(Bearer(kInferToken), Need::kModels).code(), StatusCode::kPermissionDenied);
}

TEST_F(AccessPolicyTest, ABadTokensFileFailsCreationNamingTheFileAndTheEntry) {
  Write(R"({"tokens": [{"name": "x", "token": "short", "scopes": ["infer"]}]})");
  AccessOptions o;
  o.tokens_file = path_.string();
  auto p = AccessPolicy::Create(o, &clock_);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().message(), "the tokens file " + path_.string() +
                                      ": tokens[0] (x) 'token' must be at least 16 printable characters without "
                                      "spaces");
  o.tokens_file = path_.string() + ".missing";
  EXPECT_EQ(AccessPolicy::Create(o, &clock_).status().message(), "cannot read the tokens file " + o.tokens_file);
}

TEST(ReadToken, ComesFromAFileOrAnEnvironmentVariable) {
  const auto path = std::filesystem::temp_directory_path() / ("inferd_token_" + std::to_string(::getpid()));
  std::ofstream(path) << "  abc123\n";
  EXPECT_EQ(*ReadToken(path.string(), "", nullptr), "abc123");
  EXPECT_EQ(*ReadToken("", "TOKEN", "xyz\n"), "xyz");
  EXPECT_EQ(*ReadToken("", "", nullptr), "");
  EXPECT_FALSE(ReadToken(path.string(), "TOKEN", "x").ok());                // both
  EXPECT_FALSE(ReadToken("", "TOKEN", nullptr).ok());                       // unset
  EXPECT_FALSE(ReadToken("", "TOKEN", " \n").ok());                         // empty
  EXPECT_FALSE(ReadToken((path.string() + ".missing"), "", nullptr).ok());  // unreadable
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace inferd::auth
