#include "bench/chain_sender.h"

#include <gtest/gtest.h>

namespace inferd::bench {
namespace {

TEST(ChainSender, TurnsAnAnswersOutputsIntoTheNextRequestsInputs) {
  const std::string answer =
      R"({"model_name":"a","outputs":[{"name":"h","datatype":"FP32","shape":[1,2],"data":[1.5,2]},)"
      R"({"name":"aux","datatype":"INT64","shape":[1],"data":[7]}]})";
  auto all = ChainedBody(answer, {});
  ASSERT_TRUE(all.ok()) << all.status().message();
  EXPECT_EQ(*all, R"({"inputs":[{"name":"h","datatype":"FP32","shape":[1,2],"data":[1.5,2]},)"
                  R"({"name":"aux","datatype":"INT64","shape":[1],"data":[7]}]})");
  auto renamed = ChainedBody(answer, {{"h", "x"}});
  ASSERT_TRUE(renamed.ok());
  EXPECT_EQ(*renamed, R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1,2],"data":[1.5,2]}]})");
  EXPECT_FALSE(ChainedBody(answer, {{"nope", "x"}}).ok());
  EXPECT_FALSE(ChainedBody("not json", {}).ok());
  EXPECT_FALSE(ChainedBody(R"({"outputs":[{"name":"h"}]})", {}).ok());
}

TEST(ChainSender, ParsesRenames) {
  auto r = ParseRenames("h=x,y=z");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->at("h"), "x");
  EXPECT_EQ(r->at("y"), "z");
  EXPECT_TRUE(ParseRenames("")->empty());
  for (const char* bad : {"h", "=x", "h=", "h=x,,"}) EXPECT_FALSE(ParseRenames(bad).ok()) << bad;
}

}  // namespace
}  // namespace inferd::bench
