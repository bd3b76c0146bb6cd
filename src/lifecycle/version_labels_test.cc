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

class LabelStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::filesystem::temp_directory_path() / ("inferd_labels_" + std::to_string(::getpid()) + "_" +
                                                      ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_ / "repo" / "m");
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  void WriteLegacy(const std::string& text) {
    std::FILE* f = std::fopen((root_ / "repo" / "m" / kVersionLabelsFile).c_str(), "w");
    std::fputs(text.c_str(), f);
    std::fclose(f);
  }
  std::string ModelDir() const { return (root_ / "repo" / "m").string(); }
  std::filesystem::path root_;
};

TEST_F(LabelStoreTest, PersistInTheStateDirectoryNotInTheRepository) {
  auto store = MakeDirectoryStateStore((root_ / "state").string());
  ASSERT_TRUE(store->Open().ok());
  auto empty = LoadVersionLabels(*store, "m", *LocalFilesystem(), ModelDir());
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->labels.empty());
  VersionLabels l;
  l.labels["stable"] = 2;
  l.RecordDefault(2);
  ASSERT_TRUE(SaveVersionLabels(*store, "m", l).ok());
  EXPECT_TRUE(std::filesystem::exists(root_ / "state" / "m" / "labels.json"));
  EXPECT_FALSE(std::filesystem::exists(root_ / "state" / "m" / "labels.json.tmp"));
  EXPECT_TRUE(std::filesystem::is_empty(root_ / "repo" / "m"));  // the repository is untouched
  // A second store over the same directory (a restarted server) reads them back.
  auto again = MakeDirectoryStateStore((root_ / "state").string());
  auto read = LoadVersionLabels(*again, "m", *LocalFilesystem(), ModelDir());
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(read->Find("stable"), 2);
  EXPECT_EQ(read->history, (std::vector<int64_t>{2}));
}

TEST_F(LabelStoreTest, TheLegacyFileIsReadUntilTheStoreHasLabels) {
  auto store = MakeMemoryStateStore();
  WriteLegacy(R"({"labels": {"stable": 1}, "history": [1]})");
  auto legacy = LoadVersionLabels(*store, "m", *LocalFilesystem(), ModelDir());
  ASSERT_TRUE(legacy.ok());
  EXPECT_EQ(legacy->Find("stable"), 1);
  VersionLabels l;
  l.labels["canary"] = 3;
  ASSERT_TRUE(SaveVersionLabels(*store, "m", l).ok());
  auto stored = LoadVersionLabels(*store, "m", *LocalFilesystem(), ModelDir());
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored->Find("stable"), std::nullopt);
  EXPECT_EQ(stored->Find("canary"), 3);
}

TEST_F(LabelStoreTest, CorruptDocumentsAreErrorsThatNameThem) {
  WriteLegacy("{broken");
  auto store = MakeDirectoryStateStore((root_ / "state").string());
  auto bad = LoadVersionLabels(*store, "m", *LocalFilesystem(), ModelDir());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("version_labels.json"), std::string::npos);
  ASSERT_TRUE(store->Put("m", "labels", "[1,2]").ok());
  bad = LoadVersionLabels(*store, "m", *LocalFilesystem(), ModelDir());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("labels of model 'm'"), std::string::npos) << bad.status().message();
  EXPECT_EQ(store->Put("../escape", "labels", "{}").code(), StatusCode::kInvalidArgument);
}

TEST(ControlStateStore, DefaultDirectoryIsPerRepositoryUnderTheUsersStateHome) {
  EXPECT_EQ(DefaultStateDirectory("/srv/models/", "/state", "/home/u"), "/state/inferd/repositories/_srv_models");
  EXPECT_EQ(DefaultStateDirectory("/srv/my_models", nullptr, "/home/u"),
            "/home/u/.local/state/inferd/repositories/_srv_my__models");
  EXPECT_EQ(DefaultStateDirectory("/a/b", "", nullptr), "/var/lib/inferd/repositories/_a_b");
  // '/a_b' and '/a/b' never share a directory.
  EXPECT_NE(DefaultStateDirectory("/a_b", nullptr, "/h"), DefaultStateDirectory("/a/b", nullptr, "/h"));
}

}  // namespace
}  // namespace inferd
