#include "server/authorizer.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

namespace inferd {
namespace {

TEST(Authorizer, ManagementRoutesNeedTheTokenOnceOneIsSet) {
  const Authorizer none;
  EXPECT_TRUE(none.Check("", true).ok());

  const Authorizer auth(AuthOptions{"s3cret", false});
  EXPECT_TRUE(auth.Check("", false).ok());  // inference and health: unaffected
  EXPECT_TRUE(auth.Check("Bearer s3cret", true).ok());
  const Status missing = auth.Check("", true);
  EXPECT_EQ(missing.code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(missing.message(), "management routes need a bearer token (Authorization: Bearer <token>)");
  for (const char* bad : {"Bearer s3cre", "Bearer s3cret2", "bearer s3cret", "s3cret", "Bearer ", "Basic czNjcmV0"}) {
    EXPECT_EQ(auth.Check(bad, true).code(), StatusCode::kUnauthenticated) << bad;
    EXPECT_EQ(auth.Check(bad, true).message(), "invalid bearer token") << bad;
  }
}

TEST(Authorizer, AllRoutesProtectsInferenceToo) {
  const Authorizer auth(AuthOptions{"t", true});
  EXPECT_EQ(auth.Check("", false).code(), StatusCode::kUnauthenticated);
  EXPECT_TRUE(auth.Check("Bearer t", false).ok());
}

TEST(Authorizer, TokensComeFromAFileOrAnEnvironmentVariable) {
  const auto path = std::filesystem::temp_directory_path() / ("inferd_token_" + std::to_string(::getpid()));
  {
    std::FILE* f = std::fopen(path.c_str(), "w");
    std::fputs("  abc123\n", f);
    std::fclose(f);
  }
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
}  // namespace inferd
