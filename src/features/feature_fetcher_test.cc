#include "features/feature_fetcher.h"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <optional>

#include "testing/redis_server.h"

namespace inferd::features {
namespace {

using Reply = Result<redis::FieldValues>;

redis::RedisEndpoint Endpoint(int port) {
  redis::RedisEndpoint e;
  e.name = "online";
  e.port = port;
  e.reconnect_interval = std::chrono::milliseconds(0);  // reconnect at the next call
  return e;
}

Reply FetchOne(FeatureFetcher& f, const std::string& key, std::vector<std::string> fields) {
  std::promise<Reply> p;
  auto fut = p.get_future();
  f.Fetch("online", key, std::move(fields), [&p](Reply r) { p.set_value(std::move(r)); });
  EXPECT_EQ(fut.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  return fut.get();
}

TEST(FeatureFetcher, FetchesHashFieldsAndMissingOnes) {
  testing::RedisServer redis;
  ASSERT_EQ(redis.error(), "");
  ASSERT_EQ(redis.Cli("HSET user:u1 age 31 spend 12.5"), 0);
  ASSERT_EQ(redis.Cli("SET plain x"), 0);
  FeatureFetcher f({Endpoint(redis.port())}, {});
  Reply r = FetchOne(f, "user:u1", {"age", "visits", "spend"});
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ((*r)[0], std::optional<std::string>("31"));
  EXPECT_FALSE((*r)[1].has_value());
  EXPECT_EQ((*r)[2], std::optional<std::string>("12.5"));
  Reply none = FetchOne(f, "user:nobody", {"age"});
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE((*none)[0].has_value());
  Reply wrong = FetchOne(f, "plain", {"age"});  // not a hash
  EXPECT_EQ(wrong.status().code(), StatusCode::kInternal);
  EXPECT_NE(wrong.status().message().find("WRONGTYPE"), std::string::npos);
  std::optional<Reply> unknown;
  f.Fetch("nope", "k", {"a"}, [&](Reply r) { unknown = std::move(r); });
  ASSERT_TRUE(unknown.has_value());  // refused on the caller's thread
  EXPECT_EQ(unknown->status().code(), StatusCode::kFailedPrecondition);
}

TEST(FeatureFetcher, ABurstGoesOutInOneRoundTrip) {
  testing::RedisServer redis;
  ASSERT_EQ(redis.error(), "");
  ASSERT_EQ(redis.Cli("HSET user:7 age 7"), 0);
  FeatureFetcher f({Endpoint(redis.port())}, {});
  f.Hold();
  constexpr int kN = 200;
  std::vector<std::promise<Reply>> ps(kN);
  std::vector<std::future<Reply>> fs;
  for (int i = 0; i < kN; ++i) {
    fs.push_back(ps[i].get_future());
    f.Fetch("online", i == 7 ? "user:7" : "user:x" + std::to_string(i), {"age"},
            [&ps, i](Reply r) { ps[i].set_value(std::move(r)); });
  }
  f.Release();
  for (int i = 0; i < kN; ++i) {
    ASSERT_EQ(fs[i].wait_for(std::chrono::seconds(30)), std::future_status::ready);
    Reply r = fs[i].get();
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ((*r)[0].has_value(), i == 7);  // each answer is its own key's
  }
  const auto c = f.CountsOf("online");
  EXPECT_EQ(c.fetches, static_cast<uint64_t>(kN));
  EXPECT_EQ(c.round_trips, 1u);  // max_pipeline 256 >= 200
}

TEST(FeatureFetcher, ARedisRestartIsUnavailableThenRecovers) {
  testing::RedisServer redis;
  ASSERT_EQ(redis.error(), "");
  ASSERT_EQ(redis.Cli("HSET user:u1 age 31"), 0);
  FeatureFetcher f({Endpoint(redis.port())}, {});
  ASSERT_TRUE(FetchOne(f, "user:u1", {"age"}).ok());
  redis.Stop();
  Reply down = FetchOne(f, "user:u1", {"age"});
  EXPECT_EQ(down.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(down.status().message().find("Redis connection 'online' is down"), std::string::npos)
      << down.status().message();
  ASSERT_TRUE(redis.Start());
  ASSERT_EQ(redis.Cli("HSET user:u1 age 32"), 0);  // no persistence: the restarted server starts empty
  Reply back = FetchOne(f, "user:u1", {"age"});
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ((*back)[0], std::optional<std::string>("32"));
  EXPECT_GE(f.CountsOf("online").errors, 1u);
}

TEST(FeatureFetcher, ShutdownAnswersWhatWaits) {
  testing::RedisServer redis;
  ASSERT_EQ(redis.error(), "");
  FeatureFetcher f({Endpoint(redis.port())}, {});
  f.Hold();
  std::optional<Reply> queued;
  f.Fetch("online", "k", {"a"}, [&](Reply r) { queued = std::move(r); });
  f.Shutdown();
  ASSERT_TRUE(queued.has_value());
  EXPECT_EQ(queued->status().code(), StatusCode::kUnavailable);
  std::optional<Reply> after;
  f.Fetch("online", "k", {"a"}, [&](Reply r) { after = std::move(r); });
  ASSERT_TRUE(after.has_value());
  EXPECT_NE(after->status().message().find("shutting down"), std::string::npos);
}

}  // namespace
}  // namespace inferd::features
