#include "jobs/redis/redis_store.h"

#include <gtest/gtest.h>

#include "testing/redis_server.h"

namespace inferd::jobs {
namespace {

redis::RedisEndpoint Endpoint(int port) {
  redis::RedisEndpoint e;
  e.name = "online";
  e.port = port;
  e.reconnect_interval = std::chrono::milliseconds(0);
  return e;
}

TEST(RedisSink, CommitsRowsErrorsAndTheCheckpointTogether) {
  testing::RedisServer server;
  ASSERT_EQ(server.error(), "");
  auto sink = OpenRedisSink(Endpoint(server.port()), "preds");
  ASSERT_TRUE(sink->Prepare(SinkSchema{"id", {"y", "label"}}).ok());
  EXPECT_FALSE(sink->ReadCheckpoint("job")->has_value());
  ASSERT_TRUE(sink->Commit("job", "m",
                           {ResultRow{"k1", "2", {JsonText{"[0.5,1]"}, std::string("cat")}},
                            ResultRow{"k2", "2", {JsonText{"[2,3]"}, std::string("dog")}}},
                           {RowError{3, "k3", "input 'x' needs 8 elements"}}, Checkpoint{3, 2, 1, false})
                  .ok());
  auto cp = sink->ReadCheckpoint("job");
  ASSERT_TRUE(cp.ok() && cp->has_value()) << cp.status().message();
  EXPECT_EQ((*cp)->rows_done, 3);
  EXPECT_EQ((*cp)->rows_written, 2);
  EXPECT_EQ((*cp)->row_errors, 1);
  EXPECT_FALSE((*cp)->finished);

  // What the sink wrote, read as hybrid serving reads it.
  auto store = OpenRedisStore(Endpoint(server.port()), StoreTable{"preds", "id", {"y", "label"}});
  auto hit = store->Lookup("k1");
  ASSERT_TRUE(hit.ok() && hit->has_value()) << hit.status().message();
  EXPECT_EQ((*hit)->model_name, "m");
  EXPECT_EQ((*hit)->model_version, "2");
  EXPECT_GT((*hit)->predicted_at, 1.7e9);
  ASSERT_EQ((*hit)->values.size(), 2u);
  EXPECT_EQ(CellText((*hit)->values[0]), "[0.5,1]");
  EXPECT_EQ(CellText((*hit)->values[1]), "\"cat\"");  // each value as its JSON
  EXPECT_FALSE(store->Lookup("nobody")->has_value());
  ASSERT_TRUE(store->Write("k9", "m", "3", {2.25, std::string("eel")}).ok());
  auto written = store->Lookup("k9");
  ASSERT_TRUE(written.ok() && written->has_value());
  EXPECT_EQ((*written)->model_version, "3");
  EXPECT_EQ(CellText((*written)->values[0]), "2.25");

  ASSERT_TRUE(sink->Reset("job").ok());
  EXPECT_FALSE(sink->ReadCheckpoint("job")->has_value());
  EXPECT_TRUE(store->Lookup("k2")->has_value());  // rows stay
  EXPECT_EQ(sink->Prepare(SinkSchema{"id", {"model_name"}}).code(), StatusCode::kInvalidArgument);
}

TEST(RedisSink, ADownServerIsUnavailableAndUsedAgainWhenBack) {
  testing::RedisServer server;
  ASSERT_EQ(server.error(), "");
  auto sink = OpenRedisSink(Endpoint(server.port()), "preds");
  ASSERT_TRUE(sink->Prepare(SinkSchema{"id", {"y"}}).ok());
  auto store = OpenRedisStore(Endpoint(server.port()), StoreTable{"preds", "id", {"y"}});
  server.Stop();
  Status commit = sink->Commit("job", "m", {ResultRow{"k1", "1", {1.0}}}, {}, Checkpoint{1, 1, 0, false});
  EXPECT_EQ(commit.code(), StatusCode::kUnavailable);
  EXPECT_NE(commit.message().find("Redis connection 'online' is down"), std::string::npos) << commit.message();
  EXPECT_EQ(store->Lookup("k1").status().code(), StatusCode::kUnavailable);
  ASSERT_TRUE(server.Start());
  ASSERT_TRUE(sink->Commit("job", "m", {ResultRow{"k1", "1", {1.0}}}, {}, Checkpoint{1, 1, 0, true}).ok());
  auto hit = store->Lookup("k1");
  ASSERT_TRUE(hit.ok() && hit->has_value()) << hit.status().message();
  EXPECT_EQ(sink->ReadCheckpoint("job")->value().finished, true);
}

}  // namespace
}  // namespace inferd::jobs
