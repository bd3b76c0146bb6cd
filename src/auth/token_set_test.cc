#include "auth/token_set.h"

#include <gtest/gtest.h>

#include <string>

namespace inferd::auth {
namespace {

constexpr const char* kOps = "ops-token-0123456789";
constexpr const char* kApp = "fraud-app-token-abcdef";

std::string Hex(const Digest& d) {
  static const char* kDigits = "0123456789abcdef";
  std::string s;
  for (uint8_t b : d) {
    s.push_back(kDigits[b >> 4]);
    s.push_back(kDigits[b & 15]);
  }
  return s;
}

TEST(TokenSet, Sha256IsTheStandardOne) {
  EXPECT_EQ(Hex(Sha256("")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Hex(Sha256("abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(TokenSet, MatchesEachTokenToItsEntryWithItsScopesAndModels) {
  const std::string json = R"({"tokens": [
      {"name": "ops", "sha256": ")" +
                           Hex(Sha256(kOps)) + R"(", "scopes": ["*"]},
      {"name": "fraud-app", "token": ")" +
                           std::string(kApp) + R"(", "scopes": ["infer", "read"],
       "models": ["fraud", "fraud-*"], "requests_per_second": 200}]})";
  auto set = TokenSet::Parse(json);
  ASSERT_TRUE(set.ok()) << set.status().message();
  ASSERT_EQ(set->tokens().size(), 2u);
  const TokenEntry* ops = set->Match(kOps);
  ASSERT_NE(ops, nullptr);
  EXPECT_EQ(ops->name, "ops");
  EXPECT_EQ(ops->scopes, kAllScopes);
  EXPECT_EQ(ScopeName(Scope::kModels), "models");  // what a refusal will name
  EXPECT_TRUE(ops->AllowsModel("anything"));
  const TokenEntry* app = set->Match(kApp);
  ASSERT_NE(app, nullptr);
  EXPECT_EQ(app->name, "fraud-app");
  EXPECT_TRUE(app->Has(Scope::kInfer));
  EXPECT_TRUE(app->Has(Scope::kRead));
  EXPECT_FALSE(app->Has(Scope::kModels));
  EXPECT_FALSE(app->Has(Scope::kJobs));
  EXPECT_FALSE(app->Has(Scope::kCluster));
  EXPECT_EQ(app->requests_per_second, 200);
  EXPECT_TRUE(app->AllowsModel("fraud"));
  EXPECT_TRUE(app->AllowsModel("fraud-de"));
  EXPECT_FALSE(app->AllowsModel("fraudulent"));
  EXPECT_FALSE(app->AllowsModel("credit"));
  // Near misses match nothing: a prefix, a longer token, one byte off, nothing, the digest itself.
  for (std::string miss : {std::string(kApp).substr(0, 21), std::string(kApp) + "x",
                           std::string("fraud-app-token-abcdeF"), std::string(), Hex(Sha256(kOps))}) {
    EXPECT_EQ(set->Match(miss), nullptr) << miss;
  }
}

TEST(TokenSet, RefusesABadFileNamingTheEntryAndNeverEchoingAToken) {
  const std::string ok = R"("name": "a", "token": "0123456789abcdef", "scopes": ["infer"])";
  struct Case {
    std::string json;
    std::string says;
  } cases[] = {
      {"", "not JSON"},
      {"[]", "must be an object"},
      {R"({"tokens": []})", "'tokens' must be an array of 1 to 10000"},
      {R"({"tokens": [{)" + ok + R"(}], "extra": 1})", "unknown field 'extra'"},
      {R"({"tokens": [1]})", "tokens[0] must be an object"},
      {R"({"tokens": [{"token": "0123456789abcdef", "scopes": ["infer"]}]})", "tokens[0] needs a 'name'"},
      {R"({"tokens": [{"name": "a b", "token": "0123456789abcdef", "scopes": ["infer"]}]})", "'name' must be"},
      {R"({"tokens": [{"name": "a", "scopes": ["infer"]}]})", "tokens[0] (a) needs exactly one of 'token'"},
      {R"({"tokens": [{"name": "a", "token": "short-secret", "scopes": ["infer"]}]})", "at least 16 printable"},
      {R"({"tokens": [{"name": "a", "token": "has a space inside it", "scopes": ["infer"]}]})", "without spaces"},
      {R"({"tokens": [{"name": "a", "sha256": "abc", "scopes": ["infer"]}]})", "'sha256' must be 64 hex digits"},
      {R"({"tokens": [{"name": "a", "sha256": ")" + std::string(63, 'a') + R"(g", "scopes": ["infer"]}]})",
       "'sha256' must be 64 hex digits"},
      {R"({"tokens": [{"name": "a", "token": "0123456789abcdef"}]})", "tokens[0] (a) needs 'scopes'"},
      {R"({"tokens": [{"name": "a", "token": "0123456789abcdef", "scopes": []}]})", "'scopes' must be a non-empty"},
      {R"({"tokens": [{"name": "a", "token": "0123456789abcdef", "scopes": ["admin"]}]})", "unknown scope 'admin'"},
      {R"({"tokens": [{)" + ok + R"(, "models": []}]})", "'models' must be an array of 1 to 1000"},
      {R"({"tokens": [{)" + ok + R"(, "models": ["a*b"]}]})", "'*' may only end a name"},
      {R"({"tokens": [{)" + ok + R"(, "requests_per_second": 0}]})", "'requests_per_second' must be a number > 0"},
      {R"({"tokens": [{)" + ok + R"(, "scope": ["infer"]}]})", "unknown field 'scope'"},
      {R"({"tokens": [{)" + ok + R"(}, {)" + ok + R"(}]})", "tokens[1] (a) has the name of an earlier token"},
      {R"({"tokens": [{)" + ok + R"(}, {"name": "b", "sha256": ")" + Hex(Sha256("0123456789abcdef")) +
           R"(", "scopes": ["read"]}]})",
       "tokens[1] (b) is the same token as 'a'"},
  };
  for (const Case& c : cases) {
    auto set = TokenSet::Parse(c.json);
    ASSERT_FALSE(set.ok()) << c.json;
    EXPECT_EQ(set.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(set.status().message().find(c.says), std::string::npos) << c.json << "\n" << set.status().message();
    for (const char* secret : {"0123456789abcdef", "short-secret", "has a space inside it"}) {
      EXPECT_EQ(set.status().message().find(secret), std::string::npos) << set.status().message();
    }
  }
}

}  // namespace
}  // namespace inferd::auth
