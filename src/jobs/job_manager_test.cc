#include "jobs/job_manager.h"

#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <chrono>
#include <filesystem>

#include "testing/fake_job_model.h"
#include "testing/temp_dir.h"

namespace inferd::jobs {
namespace {

using testing::FakeModel;

std::string Csv(int n) {
  std::string s = "id,a,b\n";
  for (int i = 0; i < n; ++i) s += "k" + std::to_string(i) + "," + std::to_string(i) + ",1\n";
  return s;
}

struct Fixture {
  testing::TempDir dir;
  SteadyClock clock;
  FakeModel model;

  Fixture() {
    EXPECT_TRUE(dir.Write("data/in.csv", Csv(200)));
    std::filesystem::create_directories(dir.Join("state"));
  }
  JobsConfig Config() const {
    auto c = ParseJobsConfig(R"({"allowed_dirs": [")" + dir.Join("data") + R"("]})");
    EXPECT_TRUE(c.ok()) << c.status().message();
    return *c;
  }
  std::unique_ptr<JobManager> Manager(int max_running = 1) {
    JobManagerOptions o;
    o.state_dir = dir.Join("state");
    o.max_running = max_running;
    auto m = std::make_unique<JobManager>(o, Config(), &model, &clock);
    EXPECT_TRUE(m->Start().ok());
    return m;
  }
  static std::string Spec(const std::string& table) {
    return R"({"model": "fake", "source": {"type": "csv", "path": "in.csv"}, "sink": {"type": "sqlite", "path": "out.db",
              "table": ")" +
           table + R"("}, "key": "id", "inputs": {"x": ["a", "b"]}, "max_in_flight": 1, "commit_rows": 10})";
  }
};

rapidjson::Document Parse(const std::string& json) {
  rapidjson::Document d;
  d.Parse(json.data(), json.size());
  return d;
}

std::string State(JobManager& m, const std::string& id) { return Parse(m.Get(id).value())["state"].GetString(); }

// Waits (bounded) until the job reaches `state`.
bool WaitState(JobManager& m, const std::string& id, const std::string& state) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (State(m, id) != state) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

TEST(JobManager, RunsAJobAndKeepsItsRecord) {
  Fixture f;
  auto m = f.Manager();
  auto doc = m->Submit(Fixture::Spec("a"));
  ASSERT_TRUE(doc.ok()) << doc.status().message();
  const std::string id = Parse(*doc)["id"].GetString();
  ASSERT_TRUE(WaitState(*m, id, "succeeded"));
  auto final_doc = Parse(m->Get(id).value());
  EXPECT_EQ(final_doc["rows_written"].GetInt64(), 200);
  EXPECT_EQ(final_doc["spec"]["sink"]["table"], "a");
  EXPECT_EQ(m->CountByState()[JobState::kSucceeded], 1);
  m.reset();
  // Another manager over the same state sees the finished job and does not run it again.
  const int before = f.model.submitted();
  auto again = f.Manager();
  EXPECT_EQ(State(*again, id), "succeeded");
  EXPECT_EQ(f.model.submitted(), before);
  EXPECT_EQ(again->Get("job-0-nope").status().code(), StatusCode::kNotFound);
}

TEST(JobManager, AQueuedJobCanBeCancelledAndOnlyMaxRunningRun) {
  Fixture f;
  f.model.Hold();
  auto m = f.Manager(/*max_running=*/1);
  const std::string first = Parse(m->Submit(Fixture::Spec("a")).value())["id"].GetString();
  const std::string second = Parse(m->Submit(Fixture::Spec("b")).value())["id"].GetString();
  ASSERT_TRUE(f.model.WaitHeld(1));
  EXPECT_EQ(State(*m, second), "queued");  // one runs at a time
  auto cancelled = m->Cancel(second);
  ASSERT_TRUE(cancelled.ok());
  EXPECT_EQ(std::string(Parse(*cancelled)["state"].GetString()), "cancelled");
  f.model.Release();
  ASSERT_TRUE(WaitState(*m, first, "succeeded"));
  EXPECT_EQ(State(*m, second), "cancelled");
  auto list = Parse(m->List());
  ASSERT_EQ(list["jobs"].Size(), 2u);
  EXPECT_EQ(std::string(list["jobs"][0]["id"].GetString()), second);  // newest first
}

TEST(JobManager, AJobInterruptedByShutdownResumesInTheNextManager) {
  Fixture f;
  f.model.Hold();
  auto m = f.Manager();
  const std::string id = Parse(m->Submit(Fixture::Spec("a")).value())["id"].GetString();
  ASSERT_TRUE(f.model.WaitHeld(1));
  std::thread stop([&] { m->Shutdown(); });
  // Shutdown interrupts the job, which then waits for its held answer.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (Parse(m->Get(id).value())["message"].GetString() == std::string() &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::yield();
  EXPECT_NE(std::string(Parse(m->Get(id).value())["message"].GetString()).find("interrupting"), std::string::npos);
  f.model.Release();
  stop.join();
  EXPECT_EQ(State(*m, id), "interrupted");
  m.reset();
  auto again = f.Manager();
  ASSERT_TRUE(WaitState(*again, id, "succeeded"));
  EXPECT_EQ(Parse(again->Get(id).value())["rows_written"].GetInt64(), 200);
}

TEST(JobManager, RefusedSpecsCreateNoJob) {
  Fixture f;
  auto m = f.Manager();
  EXPECT_EQ(m->Submit("{").status().code(), StatusCode::kInvalidArgument);
  std::string outside = Fixture::Spec("a");
  outside.replace(outside.find("in.csv"), 6, "/etc/hosts");
  EXPECT_EQ(m->Submit(outside).status().code(), StatusCode::kPermissionDenied);
  std::string unknown = Fixture::Spec("a");
  unknown.replace(unknown.find("\"fake\""), 6, "\"nope\"");
  EXPECT_EQ(m->Submit(unknown).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(m->List(), "{\"jobs\":[]}");
  EXPECT_FALSE(std::filesystem::exists(f.dir.Join("data/out.db")));
}

}  // namespace
}  // namespace inferd::jobs
