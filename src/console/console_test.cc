// The web console's server side: its routes (static files, redirects, auth, the JSON it serves) called in process,
// the live statistics' ring buffers and percentiles, the recent traces' ring. The pages themselves are tested in a
// browser (tests/integration/suite_console.py).
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <condition_variable>
#include <filesystem>
#include <mutex>

#include "console/assets.h"
#include "console/console_handler.h"
#include "console/live_stats.h"
#include "server/inference_server.h"
#include "server/server_options.h"
#include "tracing/recent_traces.h"

namespace inferd::console {
namespace {

namespace fs = std::filesystem;

TEST(HistogramQuantileTest, InterpolatesInsideTheBucketAsPrometheusDoes) {
  const std::vector<double> bounds = {10, 20, 40};
  // 10 observations <= 10, 10 in (10, 20], none above.
  EXPECT_DOUBLE_EQ(HistogramQuantile(0.5, bounds, {10, 20, 20, 20}), 10);
  EXPECT_DOUBLE_EQ(HistogramQuantile(0.75, bounds, {10, 20, 20, 20}), 15);
  EXPECT_DOUBLE_EQ(HistogramQuantile(0.25, bounds, {10, 20, 20, 20}), 5);
  // In +Inf: the largest bound.
  EXPECT_DOUBLE_EQ(HistogramQuantile(0.99, bounds, {0, 0, 0, 5}), 40);
  EXPECT_DOUBLE_EQ(HistogramQuantile(0.5, bounds, {0, 0, 0, 0}), 0);
  EXPECT_DOUBLE_EQ(HistogramQuantile(0.5, bounds, {1, 2}), 0);  // malformed: no answer, no crash
}

ModelStatsSnapshot Snap(const std::string& name, const std::string& version, uint64_t ok, uint64_t failed,
                        uint64_t fast, uint64_t queue_ms_total) {
  ModelStatsSnapshot s;
  s.name = name;
  s.version = version;
  s.success.count = ok;
  s.fail.count = failed;
  s.queue.count = ok;
  s.queue.ns = queue_ms_total * 1'000'000;
  s.request_us.bounds = {1000, 10000};       // 1 ms, 10 ms
  s.request_us.cumulative = {fast, ok, ok};  // `fast` under 1 ms, the rest under 10 ms
  return s;
}

rapidjson::Document Parse(const std::string& json) {
  rapidjson::Document d;
  d.Parse(json.c_str());
  EXPECT_FALSE(d.HasParseError()) << json;
  return d;
}

TEST(LiveStatsTest, EachTickIsTheDifferenceFromTheLast) {
  std::vector<ModelStatsSnapshot> now = {Snap("m", "1", 100, 0, 100, 100)};
  LiveStats live(LiveOptions{std::chrono::milliseconds(1000), 5, 10}, [&] { return now; });
  live.Sample(1000);  // baseline: what came before the first tick is not charted
  now = {Snap("m", "1", 300, 10, 200, 500)};
  live.Sample(3000);  // 2 s later: 200 more successes (100 fast, 100 slow), 10 failures
  auto d = Parse(live.Json("", 0));
  ASSERT_EQ(d["series"].Size(), 1u);
  const auto& s = d["series"][0];
  EXPECT_STREQ(s["model"].GetString(), "m");
  ASSERT_EQ(s["rps"].Size(), 1u);
  EXPECT_DOUBLE_EQ(s["t"][0].GetDouble(), 3000);
  EXPECT_NEAR(s["rps"][0].GetDouble(), 105, 1e-3);  // (200 + 10) / 2 s
  EXPECT_NEAR(s["errors_ps"][0].GetDouble(), 5, 1e-3);
  EXPECT_NEAR(s["p50_ms"][0].GetDouble(), 1, 1e-3);     // the 100th of 200: the top of the first bucket
  EXPECT_NEAR(s["p99_ms"][0].GetDouble(), 9.82, 1e-3);  // 1 + 9 * (198 - 100) / 100
  EXPECT_NEAR(s["queue_ms"][0].GetDouble(), 2, 1e-3);   // 400 ms over 200 requests
}

TEST(LiveStatsTest, KeepsTheLastTicksAndForgetsAnUnloadedVersionAfterTheHistory) {
  uint64_t n = 0;
  bool loaded = true;
  LiveStats live(LiveOptions{std::chrono::milliseconds(1000), 3, 10}, [&] {
    return loaded ? std::vector<ModelStatsSnapshot>{Snap("m", "1", n, 0, n, 0)} : std::vector<ModelStatsSnapshot>{};
  });
  for (int t = 0; t < 6; ++t, n += 10) live.Sample(t * 1000);
  auto d = Parse(live.Json("m", 0));
  EXPECT_EQ(d["series"][0]["rps"].Size(), 3u);  // history 3
  EXPECT_EQ(Parse(live.Json("m", 2))["series"][0]["rps"].Size(), 2u);
  EXPECT_EQ(Parse(live.Json("other", 0))["series"].Size(), 0u);
  loaded = false;
  live.Sample(6000);  // unloaded: charted at zero while it is within the history
  EXPECT_EQ(Parse(live.Json("", 0))["series"][0]["rps"][2].GetDouble(), 0);
  live.Sample(10000);
  EXPECT_EQ(Parse(live.Json("", 0))["series"].Size(), 0u);
}

TEST(LiveStatsTest, AReloadedVersionsCountersStartAgain) {
  std::vector<ModelStatsSnapshot> now = {Snap("m", "1", 1000, 0, 1000, 0)};
  LiveStats live(LiveOptions{std::chrono::milliseconds(1000), 10, 10}, [&] { return now; });
  live.Sample(0);
  now = {Snap("m", "1", 7, 0, 7, 0)};  // a new statistics object: its counts are all new
  live.Sample(1000);
  EXPECT_NEAR(Parse(live.Json("", 0))["series"][0]["rps"][0].GetDouble(), 7, 1e-3);
}

TEST(LiveStatsTest, AtMostMaxSeriesAndTheIdlestGiveWay) {
  std::vector<ModelStatsSnapshot> now = {Snap("a", "1", 0, 0, 0, 0), Snap("b", "1", 0, 0, 0, 0)};
  LiveStats live(LiveOptions{std::chrono::milliseconds(1000), 2, 2}, [&] { return now; });
  live.Sample(0);
  now.push_back(Snap("c", "1", 0, 0, 0, 0));
  live.Sample(1000);  // a and b active within the history: c waits
  auto d = Parse(live.Json("", 0));
  ASSERT_EQ(d["series"].Size(), 2u);
  EXPECT_STREQ(d["series"][1]["model"].GetString(), "b");
  now = {Snap("a", "1", 5, 0, 5, 0), Snap("b", "1", 0, 0, 0, 0), Snap("c", "1", 0, 0, 0, 0)};
  live.Sample(4000);  // b idle for longer than the history: c takes its place
  d = Parse(live.Json("", 0));
  ASSERT_EQ(d["series"].Size(), 2u);
  EXPECT_STREQ(d["series"][0]["model"].GetString(), "a");
  EXPECT_STREQ(d["series"][1]["model"].GetString(), "c");
}

TEST(LiveStatsTest, StartAndStopRunTicksOnTheirOwnThread) {
  std::mutex mu;
  std::condition_variable cv;
  int calls = 0;
  LiveStats live(LiveOptions{std::chrono::milliseconds(1), 10, 10}, [&] {
    std::lock_guard<std::mutex> l(mu);
    ++calls;
    cv.notify_all();
    return std::vector<ModelStatsSnapshot>{};
  });
  live.Start();
  {
    std::unique_lock<std::mutex> l(mu);
    EXPECT_TRUE(cv.wait_for(l, std::chrono::seconds(30), [&] { return calls >= 3; }));
  }
  live.Stop();
  int after;
  {
    std::lock_guard<std::mutex> l(mu);
    after = calls;
  }
  live.Stop();  // idempotent; no tick after Stop
  std::lock_guard<std::mutex> l(mu);
  EXPECT_EQ(calls, after);
}

TEST(RecentTracesTest, KeepsTheNewestWithinTheirShareOfEachSecond) {
  tracing::RecentTraces recent(3, 2);
  auto spans = [](SpanId id) {
    SpanRecord r;
    r.span_id = id;
    return std::vector<SpanRecord>{r};
  };
  auto offer = [&spans](tracing::RecentTraces& r, SpanId id, int64_t now) {
    if (r.Claim(now)) r.Keep(spans(id));
  };
  offer(recent, 1, 1'000'000'000);
  offer(recent, 2, 1'100'000'000);
  EXPECT_FALSE(recent.Claim(1'200'000'000));  // a third in the same second: not kept
  offer(recent, 4, 2'000'000'000);
  offer(recent, 5, 2'000'000'001);
  auto got = recent.Snapshot(10);
  ASSERT_EQ(got.size(), 3u);  // capacity 3: 1 went
  EXPECT_EQ(got[0].span_id, 5u);
  EXPECT_EQ(got[1].span_id, 4u);
  EXPECT_EQ(got[2].span_id, 2u);
  EXPECT_EQ(recent.Snapshot(1).size(), 1u);
  tracing::RecentTraces none(0, 10);
  EXPECT_FALSE(none.Claim(0));
  none.Keep(spans(1));
  EXPECT_TRUE(none.Snapshot(10).empty());
}

TEST(ConsoleAssetsTest, EveryPageFileIsCompiledIn) {
  for (const char* f : {"index.html", "app.js", "api.js", "style.css", "tryit.js", "chat.js", "traces.js"}) {
    const Asset* a = FindConsoleAsset(f);
    ASSERT_NE(a, nullptr) << f;
    EXPECT_FALSE(a->body.empty());
    EXPECT_EQ(a->etag.size(), 18u);
  }
  EXPECT_EQ(FindConsoleAsset("../CMakeLists.txt"), nullptr);
  EXPECT_EQ(FindConsoleAsset("app.js")->content_type, "text/javascript; charset=utf-8");
  EXPECT_NE(FindConsoleAsset("index.html")->body.find("app.js"), std::string_view::npos);
}

TEST(QueryValueTest, DecodesAndFindsTheKey) {
  EXPECT_EQ(QueryValue("model=a%20b&points=5", "model"), "a b");
  EXPECT_EQ(QueryValue("model=a+b", "model"), "a b");
  EXPECT_EQ(QueryValue("models=x&model=y", "model"), "y");
  EXPECT_EQ(QueryValue("model", "model"), "");
  EXPECT_EQ(QueryValue("a=%zz%4", "a"), "%zz%4");
  EXPECT_EQ(QueryValue("", "a"), "");
}

class ConsoleHandlerTest : public ::testing::Test {
 protected:
  void Start(auth::AccessOptions auth) {
    root_ = fs::temp_directory_path() / ("inferd_console_test_" + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_);
    ServerOptions o;
    o.model_repository = root_.string();
    if (!auth.admin_token.empty())
      o.front_end.access = std::move(*auth::AccessPolicy::Create(std::move(auth), &clock_));
    server_ = std::make_unique<InferenceServer>(o, &backends_, &clock_);
    ASSERT_TRUE(server_->Start().ok());
    live_ = std::make_unique<LiveStats>(LiveOptions{}, nullptr);
    ConsoleParts parts;
    parts.server = server_.get();
    parts.live = live_.get();
    handler_ = MakeConsoleHandler(parts, [this](http::Request&& req, http::Responder respond) {
      api_paths_.push_back(req.path);
      respond(http::Response());
    });
  }
  void TearDown() override {
    if (server_) server_->Shutdown();
    fs::remove_all(root_);
  }
  http::Response Call(const std::string& method, const std::string& target,
                      std::vector<std::pair<std::string, std::string>> headers = {}) {
    http::Request req;
    req.method = method;
    const size_t q = target.find('?');
    req.path = target.substr(0, q);
    if (q != std::string::npos) req.query = target.substr(q + 1);
    req.headers = std::move(headers);
    http::Response out;
    int answers = 0;
    handler_(std::move(req), [&](http::Response r) {
      out = std::move(r);
      ++answers;
    });
    EXPECT_EQ(answers, 1);
    return out;
  }
  static std::string HeaderOf(const http::Response& r, const std::string& name) {
    for (const auto& [k, v] : r.headers)
      if (k == name) return v;
    return "";
  }

  fs::path root_;
  BackendRegistry backends_;
  SteadyClock clock_;
  std::unique_ptr<InferenceServer> server_;
  std::unique_ptr<LiveStats> live_;
  http::Handler handler_;
  std::vector<std::string> api_paths_;
};

TEST_F(ConsoleHandlerTest, ServesItsFilesWithETagsAndAStrictPolicy) {
  Start({});
  auto r = Call("GET", "/console/");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.content_type, "text/html; charset=utf-8");
  EXPECT_EQ(r.body, FindConsoleAsset("index.html")->body);
  EXPECT_NE(HeaderOf(r, "Content-Security-Policy").find("script-src 'self'"), std::string::npos);
  EXPECT_EQ(HeaderOf(r, "X-Content-Type-Options"), "nosniff");
  const std::string etag = HeaderOf(r, "ETag");
  ASSERT_FALSE(etag.empty());
  auto again = Call("GET", "/console/index.html", {{"if-none-match", etag}});
  EXPECT_EQ(again.status, 304);
  EXPECT_TRUE(again.body.empty());
  EXPECT_EQ(Call("GET", "/console/app.js").content_type, "text/javascript; charset=utf-8");
  EXPECT_EQ(Call("GET", "/console/nope.js").status, 404);
  EXPECT_EQ(Call("GET", "/console/../console/app.js").status, 404);
  EXPECT_EQ(Call("POST", "/console/app.js").status, 405);
  EXPECT_EQ(Call("HEAD", "/console/app.js").status, 200);
}

TEST_F(ConsoleHandlerTest, RedirectsTheRootAndLeavesEveryOtherPathToTheApi) {
  Start({});
  for (const char* p : {"/", "/console"}) {
    auto r = Call("GET", p);
    EXPECT_EQ(r.status, 302) << p;
    EXPECT_EQ(HeaderOf(r, "Location"), "/console/");
  }
  Call("GET", "/consoles");
  Call("POST", "/");
  Call("GET", "/v2/health/ready");
  EXPECT_EQ(api_paths_, (std::vector<std::string>{"/consoles", "/", "/v2/health/ready"}));
}

TEST_F(ConsoleHandlerTest, InfoLiveAndTracesAnswerJson) {
  Start({});
  auto info = Parse(Call("GET", "/console/api/info").body);
  EXPECT_STREQ(info["server"]["name"].GetString(), "inferd");
  EXPECT_FALSE(info["tracing"].GetBool());
  EXPECT_FALSE(info["cluster"].GetBool());
  EXPECT_FALSE(info["auth"]["management"].GetBool());
  EXPECT_EQ(info["live"]["history"].GetInt(), 300);
  auto live = Parse(Call("GET", "/console/api/live?points=10&model=x").body);
  EXPECT_EQ(live["series"].Size(), 0u);
  auto traces = Call("GET", "/console/api/traces");
  EXPECT_EQ(traces.status, 404);  // tracing is off
  EXPECT_NE(traces.body.find("--trace-config"), std::string::npos);
  EXPECT_EQ(Call("GET", "/console/api/nope").status, 404);
}

TEST_F(ConsoleHandlerTest, TheTokenGuardsDataNotTheFiles) {
  Start(auth::AccessOptions{"s3cret", "", false});
  EXPECT_EQ(Call("GET", "/console/").status, 200);
  EXPECT_EQ(Call("GET", "/console/api/info").status, 200);  // read like statistics: open without --auth-all-routes
  auto info = Parse(Call("GET", "/console/api/info").body);
  EXPECT_TRUE(info["auth"]["management"].GetBool());
  EXPECT_FALSE(info["auth"]["all_routes"].GetBool());
  EXPECT_EQ(Call("GET", "/console/api/traces").status, 401);  // like a management route
  EXPECT_EQ(Call("GET", "/console/api/traces", {{"authorization", "Bearer wrong"}}).status, 401);
  EXPECT_EQ(Call("GET", "/console/api/traces", {{"authorization", "Bearer s3cret"}}).status, 404);  // tracing off
  EXPECT_EQ(Call("GET", "/console/api/info").body.find("s3cret"), std::string::npos);
}

TEST_F(ConsoleHandlerTest, WithAuthAllRoutesEveryCallButTheFilesNeedsTheToken) {
  Start(auth::AccessOptions{"s3cret", "", true});
  EXPECT_EQ(Call("GET", "/console/app.js").status, 200);
  EXPECT_EQ(Call("GET", "/console/api/info").status, 401);
  EXPECT_EQ(Call("GET", "/console/api/live").status, 401);
  auto ok = Call("GET", "/console/api/live", {{"authorization", "Bearer s3cret"}});
  EXPECT_EQ(ok.status, 200);
}

}  // namespace
}  // namespace inferd::console
