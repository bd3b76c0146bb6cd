#include "jobs/job_runner.h"

#include <gtest/gtest.h>

#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "jobs/sqlite/sqlite_store.h"
#include "testing/fake_job_model.h"
#include "testing/temp_dir.h"

namespace inferd::jobs {
namespace {

using testing::FakeModel;

// Rows "k<i>", x = (i, i % 7).
std::string Csv(int n, const std::map<int, std::string>& replace = {}) {
  std::string s = "id,a,b\n";
  for (int i = 0; i < n; ++i) {
    auto it = replace.find(i);
    s += it != replace.end() ? it->second
                             : "k" + std::to_string(i) + "," + std::to_string(i) + "," + std::to_string(i % 7);
    s += "\n";
  }
  return s;
}

JobSpec Spec(const testing::TempDir& dir, const std::string& extra = "") {
  auto s = ParseJobSpec(R"({"model": "fake", "source": {"type": "csv", "path": ")" + dir.Join("in.csv") +
                        R"("}, "sink": {"type": "sqlite", "path": ")" + dir.Join("out.db") +
                        R"(", "table": "preds"}, "key": "id", "inputs": {"x": ["a", "b"]}, "commit_rows": 10)" + extra +
                        "}");
  EXPECT_TRUE(s.ok()) << s.status().message();
  return *s;
}

// key -> y, read back through inferd's own SQLite source.
std::map<std::string, double> ReadPredictions(const std::string& db, const std::string& table = "preds") {
  std::map<std::string, double> out;
  auto src = OpenSqliteSource(db, "SELECT id, y, model_name, model_version FROM " + table, "id");
  EXPECT_TRUE(src.ok()) << src.status().message();
  if (!src.ok()) return out;
  Row row;
  while ((*src)->Next(&row).value()) {
    EXPECT_EQ(CellText(row.cells[2]), "fake");
    EXPECT_EQ(CellText(row.cells[3]), "1");
    EXPECT_TRUE(out.emplace(CellText(row.cells[0]), std::get<double>(row.cells[1])).second);
  }
  return out;
}

std::vector<std::string> ReadErrors(const std::string& db) {
  std::vector<std::string> out;
  auto src = OpenSqliteSource(db, "SELECT row_ordinal, key, message FROM preds_errors", "row_ordinal");
  EXPECT_TRUE(src.ok()) << src.status().message();
  if (!src.ok()) return out;
  Row row;
  while ((*src)->Next(&row).value()) out.push_back(CellText(row.cells[1]) + ": " + CellText(row.cells[2]));
  return out;
}

void ExpectValues(const std::map<std::string, double>& got, int n, const std::set<int>& missing = {}) {
  EXPECT_EQ(got.size(), static_cast<size_t>(n) - missing.size());
  for (int i = 0; i < n; ++i) {
    if (missing.count(i)) continue;
    auto it = got.find("k" + std::to_string(i));
    ASSERT_NE(it, got.end()) << i;
    EXPECT_EQ(it->second, i + 10.0 * (i % 7)) << i;
  }
}

struct Fixture {
  testing::TempDir dir;
  SteadyClock clock;
  JobStores stores{[] {
    JobsConfig c;
    c.unrestricted = true;
    return c;
  }()};
  FakeModel model;
};

TEST(JobRunner, WritesEveryRowOnceAsBackgroundWork) {
  Fixture f;
  ASSERT_TRUE(f.dir.Write("in.csv", Csv(103)));
  JobRunner job("j1", Spec(f.dir), &f.stores, &f.model, &f.clock);
  ASSERT_TRUE(job.Run().ok());
  const JobProgress p = job.Progress();
  EXPECT_EQ(p.state, JobState::kSucceeded);
  EXPECT_EQ(p.rows_done, 103);
  EXPECT_EQ(p.rows_written, 103);
  EXPECT_EQ(p.row_errors, 0);
  EXPECT_EQ(p.model_versions, (std::vector<std::string>{"1"}));
  ExpectValues(ReadPredictions(f.dir.Join("out.db")), 103);
  EXPECT_EQ(f.model.submitted(), 26);  // 4 rows per request (max_batch_size)
  EXPECT_EQ(f.model.foreground(), 0);
}

TEST(JobRunner, BadRowsBecomeRowErrorsAndTheJobGoesOn) {
  Fixture f;
  // Row 5 has a text where a number goes, row 9 lacks a field, row 13 (x0 -13) makes its request fail.
  ASSERT_TRUE(f.dir.Write("in.csv", Csv(20, {{5, "k5,five,1"}, {9, "k9,9"}, {13, "k13,-13,6"}})));
  JobRunner job("j", Spec(f.dir), &f.stores, &f.model, &f.clock);
  ASSERT_TRUE(job.Run().ok());
  EXPECT_EQ(job.Progress().rows_written, 17);
  EXPECT_EQ(job.Progress().row_errors, 3);
  ExpectValues(ReadPredictions(f.dir.Join("out.db")), 20, {5, 9, 13});
  const auto errors = ReadErrors(f.dir.Join("out.db"));
  ASSERT_EQ(errors.size(), 3u);
  EXPECT_NE(errors[0].find("k5: input 'x': column 'a' value 'five' is not a number"), std::string::npos) << errors[0];
  EXPECT_NE(errors[1].find("k9: the CSV record has 2 fields"), std::string::npos) << errors[1];
  EXPECT_NE(errors[2].find("k13: thirteen is unlucky"), std::string::npos) << errors[2];
}

TEST(JobRunner, TooManyRowErrorsFailTheJob) {
  Fixture f;
  ASSERT_TRUE(f.dir.Write("in.csv", Csv(40, {{3, "k3,x,1"}, {30, "k30,y,1"}})));
  JobRunner job("j", Spec(f.dir, R"(, "max_row_errors": 1)"), &f.stores, &f.model, &f.clock);
  Status st = job.Run();
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(st.message().find("more than max_row_errors (1)"), std::string::npos) << st.message();
  EXPECT_EQ(job.Progress().state, JobState::kFailed);
}

TEST(JobRunner, ResumesFromItsCheckpointAndWritesEachKeyOnce) {
  Fixture f;
  ASSERT_TRUE(f.dir.Write("in.csv", Csv(200)));
  {
    f.model.SetFailAfter(12);  // the model goes away after 48 rows
    JobRunner job("resume", Spec(f.dir), &f.stores, &f.model, &f.clock);
    EXPECT_EQ(job.Run().code(), StatusCode::kNotFound);
    EXPECT_EQ(job.Progress().rows_done, 48);  // every answered request is committed; the failed ones are not
  }
  FakeModel again;
  JobRunner job("resume", Spec(f.dir), &f.stores, &again, &f.clock);
  ASSERT_TRUE(job.Run().ok());
  EXPECT_EQ(job.Progress().rows_resumed, 48);
  EXPECT_EQ(job.Progress().rows_done, 200);
  EXPECT_EQ(job.Progress().rows_written, 200);
  EXPECT_EQ(again.rows_seen(), 152);  // only the rows after the checkpoint ran again
  ExpectValues(ReadPredictions(f.dir.Join("out.db")), 200);
  // A finished job run again starts over (a new night's predictions).
  FakeModel third;
  JobRunner rerun("resume", Spec(f.dir), &f.stores, &third, &f.clock);
  ASSERT_TRUE(rerun.Run().ok());
  EXPECT_EQ(rerun.Progress().rows_resumed, 0);
  EXPECT_EQ(third.rows_seen(), 200);
  ExpectValues(ReadPredictions(f.dir.Join("out.db")), 200);
}

TEST(JobRunner, AnOverloadedModelIsRetried) {
  Fixture f;
  ASSERT_TRUE(f.dir.Write("in.csv", Csv(30)));
  f.model.SetUnavailable(5);
  JobRunner job("j", Spec(f.dir), &f.stores, &f.model, &f.clock);
  ASSERT_TRUE(job.Run().ok());
  EXPECT_EQ(job.Progress().row_errors, 0);
  ExpectValues(ReadPredictions(f.dir.Join("out.db")), 30);
}

TEST(JobRunner, CancelStopsReadingAndKeepsWhatWasAnswered) {
  Fixture f;
  ASSERT_TRUE(f.dir.Write("in.csv", Csv(1000)));
  f.model.Hold();
  JobRunner job("c", Spec(f.dir, R"(, "max_in_flight": 2)"), &f.stores, &f.model, &f.clock);
  Status result;
  std::thread t([&] { result = job.Run(); });
  ASSERT_TRUE(f.model.WaitHeld(2));  // the in-flight cap holds the job at two requests
  EXPECT_EQ(f.model.submitted(), 2);
  job.Cancel();
  f.model.Release();
  t.join();
  EXPECT_EQ(result.code(), StatusCode::kCancelled);
  EXPECT_EQ(job.Progress().state, JobState::kCancelled);
  EXPECT_LT(job.Progress().rows_done, 1000);
  const auto got = ReadPredictions(f.dir.Join("out.db"));
  EXPECT_EQ(static_cast<int64_t>(got.size()), job.Progress().rows_written);
}

TEST(JobRunner, MismatchedSpecsFailValidationAndWriteNothing) {
  Fixture f;
  ASSERT_TRUE(f.dir.Write("in.csv", Csv(3)));
  const std::pair<std::string, std::string> cases[] = {
      {R"({"model": "fake", "key": "nope", "inputs": {"x": ["a", "b"]}})", "'key' names column 'nope'"},
      {R"({"model": "fake", "key": "id", "inputs": {"x": ["a", "c"]}})",
       "names column 'c', which the source does not have"},
      {R"({"model": "fake", "key": "id", "inputs": {"w": ["a", "b"]}})", "names 'w', which model 'fake' does not take"},
      {R"({"model": "fake", "key": "id", "inputs": {"x": ["a", "b"]}, "outputs": ["z"]})", "'outputs' names 'z'"},
      {R"({"model": "other", "key": "id", "inputs": {"x": ["a", "b"]}})", "unknown model 'other'"},
  };
  for (const auto& [body, want] : cases) {
    std::string json = body;
    json.insert(json.size() - 1, R"(, "source": {"type": "csv", "path": ")" + f.dir.Join("in.csv") +
                                     R"("}, "sink": {"type": "sqlite", "path": ")" + f.dir.Join("out.db") +
                                     R"(", "table": "preds"})");
    auto spec = ParseJobSpec(json);
    ASSERT_TRUE(spec.ok()) << spec.status().message();
    JobRunner job("v", *spec, &f.stores, &f.model, &f.clock);
    Status st = job.Validate();
    EXPECT_FALSE(st.ok()) << json;
    EXPECT_NE(st.message().find(want), std::string::npos) << st.message();
    EXPECT_FALSE(job.Run().ok());
  }
  EXPECT_FALSE(std::filesystem::exists(f.dir.Join("out.db")));
  EXPECT_EQ(f.model.submitted(), 0);
}

TEST(JobRunner, JsonlSinkResumesByCuttingBackToTheCheckpoint) {
  Fixture f;
  ASSERT_TRUE(f.dir.Write("in.csv", Csv(60, {{7, "k7,x,1"}})));
  const std::string extra = R"(, "sink": {"type": "jsonl", "path": ")" + f.dir.Join("out.jsonl") + R"("})";
  auto spec = ParseJobSpec(R"({"model": "fake", "source": {"type": "csv", "path": ")" + f.dir.Join("in.csv") +
                           R"("}, "key": "id", "inputs": {"x": ["a", "b"]}, "commit_rows": 10)" + extra + "}");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  {
    f.model.SetFailAfter(6);
    JobRunner job("f", *spec, &f.stores, &f.model, &f.clock);
    EXPECT_FALSE(job.Run().ok());
  }
  FakeModel again;
  JobRunner job("f", *spec, &f.stores, &again, &f.clock);
  ASSERT_TRUE(job.Run().ok());
  EXPECT_GT(job.Progress().rows_resumed, 0);
  std::ifstream in(f.dir.Join("out.jsonl"));
  std::set<std::string> keys;
  std::string line;
  int lines = 0;
  while (std::getline(in, line)) {
    ++lines;
    const size_t at = line.find("\"id\":\"");
    ASSERT_NE(at, std::string::npos) << line;
    keys.insert(line.substr(at + 6, line.find('"', at + 6) - at - 6));
  }
  EXPECT_EQ(lines, 59);
  EXPECT_EQ(keys.size(), 59u);
  EXPECT_FALSE(keys.count("k7"));
  std::ifstream errors(f.dir.Join("out.jsonl.errors.jsonl"));
  int error_lines = 0;
  while (std::getline(errors, line)) ++error_lines;
  EXPECT_EQ(error_lines, 1);
}

}  // namespace
}  // namespace inferd::jobs
