#include "lifecycle/version_labels.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace inferd {
namespace {

TEST(VersionLabels, HistoryRecordsChangesOnlyAndIsBounded) {
  VersionLabels l;
  EXPECT_TRUE(l.RecordDefault(1));
  EXPECT_FALSE(l.RecordDefault(1));
  EXPECT_TRUE(l.RecordDefault(2));
  EXPECT_EQ(l.history, (std::vector<int64_t>{1, 2}));
  for (int64_t v = 3; v < 300; ++v) l.RecordDefault(v);
  EXPECT_EQ(l.history.size(), kMaxDefaultHistory);
  EXPECT_EQ(l.history.back(), 299);
}

TEST(VersionLabels, RollbackWalksBackAndSkipsUnusableVersions) {
  VersionLabels l;
  for (int64_t v : {1, 2, 3, 4}) l.RecordDefault(v);
  auto any = [](int64_t) { return true; };
  EXPECT_EQ(l.RollbackTarget(4, any), 3);
  // Version 3's folder is gone: the next older one.
  EXPECT_EQ(l.RollbackTarget(4, [](int64_t v) { return v != 3; }), 2);
  l.TruncateAfter(3);
  EXPECT_EQ(l.history, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(l.RollbackTarget(3, any), 2);  // a second rollback goes further back
  VersionLabels only;
  only.RecordDefault(7);
  EXPECT_FALSE(only.RollbackTarget(7, any).has_value());
}

TEST(VersionLabels, LabelNames) {
  EXPECT_TRUE(ValidateLabelName("stable").ok());
  EXPECT_TRUE(ValidateLabelName("canary-2.b_x").ok());
  EXPECT_FALSE(ValidateLabelName("").ok());
  EXPECT_FALSE(ValidateLabelName("12").ok());  // a version, not a label
  EXPECT_FALSE(ValidateLabelName("a/b").ok());
  EXPECT_FALSE(ValidateLabelName(std::string(65, 'a')).ok());
}

TEST(VersionLabels, JsonRoundTripAndErrors) {
  VersionLabels l;
  l.labels["stable"] = 3;
  l.labels["canary"] = 4;
  l.RecordDefault(1);
  l.RecordDefault(3);
  auto back = ParseVersionLabelsJson(VersionLabelsToJson(l));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->labels, l.labels);
  EXPECT_EQ(back->history, l.history);
  EXPECT_FALSE(ParseVersionLabelsJson("[]").ok());
  EXPECT_FALSE(ParseVersionLabelsJson(R"({"labels": {"stable": 0}})").ok());
  EXPECT_FALSE(ParseVersionLabelsJson(R"({"labels": {"1": 2}})").ok());
  EXPECT_FALSE(ParseVersionLabelsJson(R"({"history": ["x"]})").ok());
}

TEST(VersionLabels, PersistsAcrossReadsAndMissingFileIsEmpty) {
  const auto dir = std::filesystem::temp_directory_path() / ("inferd_labels_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  auto empty = ReadVersionLabels(dir.string());
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->labels.empty());
  VersionLabels l;
  l.labels["stable"] = 2;
  l.RecordDefault(2);
  ASSERT_TRUE(WriteVersionLabels(dir.string(), l).ok());
  auto read = ReadVersionLabels(dir.string());
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(read->Find("stable"), 2);
  EXPECT_FALSE(std::filesystem::exists(dir / "version_labels.json.tmp"));
  {
    std::FILE* f = std::fopen((dir / kVersionLabelsFile).c_str(), "w");
    std::fputs("{broken", f);
    std::fclose(f);
  }
  auto bad = ReadVersionLabels(dir.string());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("version_labels.json"), std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace inferd
