#include "jobs/prediction_store.h"

#include <gtest/gtest.h>

#include "jobs/sqlite/sqlite_store.h"
#include "testing/temp_dir.h"

namespace inferd::jobs {
namespace {

StoreTable Table() { return StoreTable{"preds", "id", {"y", "label"}}; }

TEST(SqliteStore, ReadsWhatAJobSinkWroteAndWritesBack) {
  testing::TempDir dir;
  const std::string db = dir.Join("p.db");
  {
    auto sink = OpenSqliteSink(db, "preds");
    ASSERT_TRUE(sink.ok()) << sink.status().message();
    ASSERT_TRUE((*sink)->Prepare(SinkSchema{"id", {"y", "label"}}).ok());
    ASSERT_TRUE((*sink)
                    ->Commit("job", "m", {ResultRow{"k1", "2", {JsonText{"[0.5,1]"}, std::string("cat")}}}, {},
                             Checkpoint{1, 1, 0, true})
                    .ok());
  }
  auto store = OpenSqliteStore(db, Table(), /*writable=*/true);
  ASSERT_TRUE(store.ok()) << store.status().message();
  auto hit = (*store)->Lookup("k1");
  ASSERT_TRUE(hit.ok()) << hit.status().message();
  ASSERT_TRUE(hit->has_value());
  EXPECT_EQ((*hit)->model_name, "m");
  EXPECT_EQ((*hit)->model_version, "2");
  EXPECT_GT((*hit)->predicted_at, 1.7e9);
  ASSERT_EQ((*hit)->values.size(), 2u);
  EXPECT_EQ(CellText((*hit)->values[0]), "[0.5,1]");
  EXPECT_EQ(CellText((*hit)->values[1]), "cat");
  EXPECT_FALSE((*store)->Lookup("k2")->has_value());
  ASSERT_TRUE((*store)->Write("k2", "m", "3", {2.25, std::string("dog")}).ok());
  auto written = (*store)->Lookup("k2");
  ASSERT_TRUE(written.ok() && written->has_value());
  EXPECT_EQ((*written)->model_version, "3");
  EXPECT_EQ(std::get<double>((*written)->values[0]), 2.25);
}

TEST(SqliteStore, AMissingTableReadsAsEmptyAndReadOnlyStoresRefuseWrites) {
  testing::TempDir dir;
  const std::string db = dir.Join("empty.db");
  {
    auto create = OpenSqliteStore(db, Table(), /*writable=*/true);  // creates the file, not the table
    ASSERT_TRUE(create.ok());
  }
  auto store = OpenSqliteStore(db, Table(), /*writable=*/false);
  ASSERT_TRUE(store.ok()) << store.status().message();
  auto miss = (*store)->Lookup("k");
  ASSERT_TRUE(miss.ok()) << miss.status().message();
  EXPECT_FALSE(miss->has_value());
  EXPECT_EQ((*store)->Write("k", "m", "1", {1.0, std::string("x")}).code(), StatusCode::kFailedPrecondition);
  EXPECT_FALSE(OpenSqliteStore(dir.Join("missing.db"), Table(), false).ok());
}

}  // namespace
}  // namespace inferd::jobs
