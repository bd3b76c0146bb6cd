#include "scheduler/lora_catalog.h"

#include <gtest/gtest.h>

namespace inferd {
namespace {

TEST(LoraCatalogTest, NamesAreCheckedAndUnique) {
  LoraCatalog c;
  EXPECT_TRUE(c.empty());
  for (const char* bad : {"", "a/b", "..", "with space", "é"}) {
    EXPECT_EQ(c.Add(LoraEntry{bad, "base", "/x"}).status().code(), StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_EQ(c.Add(LoraEntry{std::string(129, 'a'), "base", "/x"}).status().code(), StatusCode::kInvalidArgument);
  auto a = c.Add(LoraEntry{"sql-v1.2:prod_x", "base", "/x"});
  ASSERT_TRUE(a.ok());
  EXPECT_GT(a->id, 0u);
  EXPECT_FALSE(c.empty());
  EXPECT_EQ(c.Add(LoraEntry{"sql-v1.2:prod_x", "other", "/y"}).status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(c.Find("sql-v1.2:prod_x")->path, "/x");
  EXPECT_FALSE(c.Find("nope"));
  EXPECT_EQ(c.Remove("nope").code(), StatusCode::kNotFound);
  ASSERT_TRUE(c.Remove("sql-v1.2:prod_x").ok());
  EXPECT_TRUE(c.empty());
  // Loaded again: a new adapter for caches and prefix keys.
  auto again = c.Add(LoraEntry{"sql-v1.2:prod_x", "base", "/x"});
  ASSERT_TRUE(again.ok());
  EXPECT_NE(again->id, a->id);
}

TEST(LoraCatalogTest, TheRepositorysAdaptersFollowItsFolders) {
  LoraCatalog c;
  ASSERT_TRUE(c.Add(LoraEntry{"api", "base", "/elsewhere/api"}).ok());
  auto skipped = c.SetRepositoryAdapters(
      "base", {LoraEntry{"a", "", "/repo/base/loras/a"}, LoraEntry{"b", "", "/repo/base/loras/b"},
               LoraEntry{"api", "", "/repo/base/loras/api"}, LoraEntry{"bad name", "", "/repo/base/loras/bad name"}});
  EXPECT_EQ(skipped, (std::vector<std::string>{"api", "bad name"}));  // the API's keeps its name
  EXPECT_EQ(c.Find("api")->path, "/elsewhere/api");
  const uint64_t a_id = c.Find("a")->id;
  EXPECT_TRUE(c.Find("a")->from_repository);
  EXPECT_EQ(c.Find("a")->base_model, "base");
  // Another model's folder holding an adapter of the same name does not take it.
  EXPECT_EQ(c.SetRepositoryAdapters("other", {LoraEntry{"a", "", "/repo/other/loras/a"}}),
            std::vector<std::string>{"a"});
  // The next scan: b's folder is gone, a unchanged (same id), c new.
  c.SetRepositoryAdapters("base", {LoraEntry{"a", "", "/repo/base/loras/a"}, LoraEntry{"c", "", "/repo/base/loras/c"}});
  EXPECT_EQ(c.Find("a")->id, a_id);
  EXPECT_FALSE(c.Find("b"));
  EXPECT_TRUE(c.Find("c"));
  EXPECT_TRUE(c.Find("api"));
  EXPECT_EQ(c.List("base").size(), 3u);
  EXPECT_EQ(c.List().size(), 3u);
  c.SetRepositoryAdapters("base", {});
  EXPECT_EQ(c.List().size(), 1u);  // the API's stays
}

}  // namespace
}  // namespace inferd
