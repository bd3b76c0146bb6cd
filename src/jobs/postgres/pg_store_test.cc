#include "jobs/postgres/pg_store.h"

#include <gtest/gtest.h>

#include "testing/postgres_server.h"

namespace inferd::jobs {
namespace {

StoreTable Table() { return StoreTable{"preds", "id", {"y"}, std::chrono::milliseconds(0)}; }

TEST(PostgresStore, ReadsWritesAndComesBackAfterTheServerDoes) {
  testing::PostgresServer pg;
  ASSERT_EQ(pg.error(), "");
  auto store = OpenPostgresStore("warehouse", pg.conninfo(), Table());
  auto none = store->Lookup("k");  // no table yet: empty
  ASSERT_TRUE(none.ok()) << none.status().message();
  EXPECT_FALSE(none->has_value());
  {
    auto sink = OpenPostgresSink("warehouse", pg.conninfo(), "preds");
    ASSERT_TRUE(sink.ok()) << sink.status().message();
    ASSERT_TRUE((*sink)->Prepare(SinkSchema{"id", {"y"}}).ok());
    ASSERT_TRUE(
        (*sink)->Commit("job", "m", {ResultRow{"k", "2", {JsonText{"[0.5, 1]"}}}}, {}, Checkpoint{1, 1, 0, true}).ok());
  }
  auto hit = store->Lookup("k");
  ASSERT_TRUE(hit.ok()) << hit.status().message();
  ASSERT_TRUE(hit->has_value());
  EXPECT_EQ((*hit)->model_name, "m");
  EXPECT_EQ((*hit)->model_version, "2");
  EXPECT_EQ(CellText((*hit)->values.at(0)), "[0.5, 1]");  // jsonb's text
  ASSERT_TRUE(store->Write("k2", "m", "3", {2.5}).ok());
  EXPECT_EQ(CellText(store->Lookup("k2").value()->values.at(0)), "2.5");

  ASSERT_TRUE(pg.Stop());
  auto down = store->Lookup("k");
  EXPECT_EQ(down.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(down.status().message().find("PostgreSQL connection 'warehouse'"), std::string::npos)
      << down.status().message();
  EXPECT_EQ(down.status().message().find("host="), std::string::npos);  // the conninfo is never shown
  EXPECT_EQ(store->Write("k3", "m", "3", {1.0}).code(), StatusCode::kUnavailable);
  ASSERT_TRUE(pg.Start());
  auto back = store->Lookup("k");  // reconnects
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_TRUE(back->has_value());
}

TEST(PostgresStore, AnUnreachableServerIsUnavailableNotAHang) {
  auto store = OpenPostgresStore("down", "host=127.0.0.1 port=1 connect_timeout=2 password=hunter2", Table());
  auto r = store->Lookup("k");
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(r.status().message().find("hunter2"), std::string::npos);
}

}  // namespace
}  // namespace inferd::jobs
