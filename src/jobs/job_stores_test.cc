#include "jobs/job_stores.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "testing/temp_dir.h"

namespace inferd::jobs {
namespace {

JobStores Restricted(const testing::TempDir& dir) {
  auto c = ParseJobsConfig(R"({"allowed_dirs": [")" + dir.Join("jobs") + R"("],
    "connections": {"feat": {"type": "sqlite", "path": ")" +
                           dir.Join("feat.db") + R"("},
                    "wh": {"type": "postgres", "conninfo": "host=/nowhere dbname=x"}}})");
  EXPECT_TRUE(c.ok()) << c.status().message();
  return JobStores(*c);
}

TEST(JobStores, PathsMustStayInsideTheAllowedDirectories) {
  testing::TempDir dir;
  ASSERT_TRUE(dir.Write("jobs/in.csv", "id\n1\n"));
  ASSERT_TRUE(dir.Write("secret.csv", "id\n1\n"));
  ASSERT_EQ(::symlink(dir.Join("secret.csv").c_str(), dir.Join("jobs/link.csv").c_str()), 0);
  const JobStores stores = Restricted(dir);
  const std::string real_jobs = stores.config().allowed_dirs.at(0);

  auto rel = stores.ResolvePath("in.csv", true);
  ASSERT_TRUE(rel.ok()) << rel.status().message();
  EXPECT_EQ(*rel, real_jobs + "/in.csv");
  EXPECT_TRUE(stores.ResolvePath(dir.Join("jobs/in.csv"), true).ok());
  EXPECT_TRUE(stores.ResolvePath("new_out.db", false).ok());  // a sink may not exist yet

  for (const std::string& bad : std::vector<std::string>{"../secret.csv", dir.Join("jobs/../secret.csv"),
                                                         dir.Join("secret.csv"), "/etc/passwd", "link.csv"}) {
    auto r = stores.ResolvePath(bad, true);
    EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied) << bad << ": " << r.status().message();
  }
  EXPECT_EQ(stores.ResolvePath(dir.Join("out.db"), false).status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(stores.ResolvePath("missing.csv", true).status().code(), StatusCode::kInvalidArgument);
}

TEST(JobStores, ConnectionsAreNamedNeverSpelledOut) {
  testing::TempDir dir;
  ASSERT_TRUE(dir.Write("jobs/x", ""));
  const JobStores stores = Restricted(dir);
  auto spec = [](const std::string& source) {
    auto s = ParseJobSpec(R"({"model": "m", "source": )" + source +
                          R"(, "sink": {"type": "jsonl", "path": "o.jsonl"}, "key": "k", "inputs": {"x": "v"}})");
    EXPECT_TRUE(s.ok()) << s.status().message();
    return *s;
  };
  EXPECT_TRUE(stores.Check(spec(R"({"type": "sqlite", "connection": "feat", "query": "SELECT 1"})")).ok());
  Status unknown = stores.Check(spec(R"({"type": "postgres", "connection": "prod", "query": "SELECT 1"})"));
  EXPECT_EQ(unknown.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(unknown.message().find("does not define"), std::string::npos);
  Status wrong = stores.Check(spec(R"({"type": "sqlite", "connection": "wh", "query": "SELECT 1"})"));
  EXPECT_EQ(wrong.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(wrong.message().find("host="), std::string::npos);  // the conninfo is never shown
  EXPECT_EQ(stores.Check(spec(R"({"type": "sqlite", "path": "/etc/hosts", "query": "SELECT 1"})")).code(),
            StatusCode::kPermissionDenied);
}

TEST(JobStores, NoAllowedDirectoriesMeansNoPaths) {
  const JobStores stores(JobsConfig{});
  EXPECT_EQ(stores.ResolvePath("/tmp/x.csv", true).status().code(), StatusCode::kPermissionDenied);
}

TEST(JobsConfig, RedisConnectionsHaveDefaults) {
  auto c = ParseJobsConfig(R"({"connections": {"r": {"type": "redis"},
                                               "s": {"type": "redis", "host": "10.0.0.5", "port": 6380,
                                                     "password": "pw", "db": 2}}})");
  ASSERT_TRUE(c.ok()) << c.status().message();
  const Connection& r = c->connections.at("r");
  EXPECT_EQ(r.type, StoreType::kRedis);
  EXPECT_EQ(r.host, "127.0.0.1");
  EXPECT_EQ(r.port, 6379);
  EXPECT_EQ(r.db, 0);
  const Connection& s = c->connections.at("s");
  EXPECT_EQ(s.host, "10.0.0.5");
  EXPECT_EQ(s.port, 6380);
  EXPECT_EQ(s.password, "pw");
  EXPECT_EQ(s.db, 2);
  // Redis holds predictions (a job's sink, hybrid serving's store), never a job's source.
  const JobStores stores(*c);
  EXPECT_TRUE(stores.CheckStore("r", "t").ok());
  auto spec = ParseJobSpec(R"({"model": "m", "source": {"type": "redis", "connection": "r"},
                              "sink": {"type": "redis", "connection": "r", "table": "t"}, "key": "id",
                              "inputs": {"x": ["a"]}})");
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(spec.status().message().find("redis is a sink only"), std::string::npos);
}

TEST(JobsConfig, MalformedConfigsNameTheField) {
  const std::pair<const char*, const char*> cases[] = {
      {"[]", "JSON object"},
      {R"({"allowed_dirs": "/tmp"})", "'allowed_dirs' must be an array"},
      {R"({"allowed_dirs": ["relative"]})", "not an absolute path"},
      {R"({"allowed_dirs": ["/no/such/dir/anywhere"]})", "does not exist"},
      {R"({"connections": {"a": {"type": "mysql"}}})", "must be sqlite, postgres or redis"},
      {R"({"connections": {"a": {"type": "redis", "port": 70000}}})",
       "'connections.a.port' must be an integer in 1..65535"},
      {R"({"connections": {"a": {"type": "redis", "db": "0"}}})", "'connections.a.db' must be an integer"},
      {R"({"connections": {"a": {"type": "sqlite", "path": "x", "host": "h"}}})",
       "'connections.a.host' is not a known"},
      {R"({"connections": {"a": {"type": "postgres"}}})", "'connections.a.conninfo' is required"},
      {R"({"connections": {"a": {"type": "sqlite", "path": "x", "user": "u"}}})",
       "'connections.a.user' is not a known"},
      {R"({"other": 1})", "'other' is not a known field"},
  };
  for (const auto& [json, want] : cases) {
    auto c = ParseJobsConfig(json);
    ASSERT_FALSE(c.ok()) << json;
    EXPECT_NE(c.status().message().find(want), std::string::npos) << json << " -> " << c.status().message();
  }
}

}  // namespace
}  // namespace inferd::jobs
