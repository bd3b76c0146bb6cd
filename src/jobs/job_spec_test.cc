#include "jobs/job_spec.h"

#include <gtest/gtest.h>

namespace inferd::jobs {
namespace {

const char* kGood = R"({"model": "mlp", "version": "2",
  "source": {"type": "csv", "path": "in.csv"},
  "sink": {"type": "sqlite", "path": "out.db", "table": "preds"},
  "key": "id", "inputs": {"x": ["f0", "f1"], "z": "packed"}, "outputs": ["y"],
  "rows_per_request": 8, "max_in_flight": 3, "commit_rows": 50, "max_row_errors": 0})";

TEST(JobSpec, ParsesEveryField) {
  auto s = ParseJobSpec(kGood);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->model, "mlp");
  EXPECT_EQ(s->version, "2");
  EXPECT_EQ(s->source.type, StoreType::kCsv);
  EXPECT_EQ(s->source.path, "in.csv");
  EXPECT_EQ(s->sink.type, StoreType::kSqlite);
  EXPECT_EQ(s->sink.table, "preds");
  EXPECT_EQ(s->key, "id");
  ASSERT_EQ(s->inputs.size(), 2u);
  EXPECT_EQ(s->inputs[0].tensor, "x");
  EXPECT_EQ(s->inputs[0].columns, (std::vector<std::string>{"f0", "f1"}));
  EXPECT_EQ(s->inputs[1].columns, (std::vector<std::string>{"packed"}));
  EXPECT_EQ(s->outputs, (std::vector<std::string>{"y"}));
  EXPECT_EQ(s->rows_per_request, 8);
  EXPECT_EQ(s->max_in_flight, 3);
  EXPECT_EQ(s->commit_rows, 50);
  EXPECT_EQ(s->max_row_errors, 0);
}

TEST(JobSpec, RoundTripsThroughJson) {
  auto s = ParseJobSpec(kGood);
  ASSERT_TRUE(s.ok());
  auto again = ParseJobSpec(ToJson(*s));
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(ToJson(*again), ToJson(*s));
  EXPECT_EQ(again->inputs[1].columns, s->inputs[1].columns);
}

TEST(JobSpec, DefaultsApply) {
  auto s = ParseJobSpec(R"({"model": "m", "source": {"type": "jsonl", "path": "a.jsonl"},
    "sink": {"type": "jsonl", "path": "b.jsonl"}, "key": "k", "inputs": {"x": "v"}})");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->rows_per_request, 0);
  EXPECT_EQ(s->max_in_flight, 4);
  EXPECT_EQ(s->commit_rows, 1000);
  EXPECT_EQ(s->max_row_errors, 100);
  EXPECT_TRUE(s->outputs.empty());
}

TEST(JobSpec, MalformedSpecsNameTheField) {
  const std::pair<const char*, const char*> cases[] = {
      {"[]", "JSON object"},
      {"{", "malformed JSON"},
      {R"({"source": {}})", "'model' is required"},
      {R"({"model": "m", "sink": {}})", "'source' is required"},
      {R"({"model": "m", "source": {"type": "excel", "path": "a"}})", "'source.type' must be one of"},
      {R"({"model": "m", "source": {"type": "csv"}})", "'source.path' is required"},
      {R"({"model": "m", "source": {"type": "csv", "path": "a", "query": "SELECT 1"}})", "takes a path only"},
      {R"({"model": "m", "source": {"type": "postgres", "query": "SELECT 1"}})", "'source.connection' is required"},
      {R"({"model": "m", "source": {"type": "sqlite", "path": "a.db"}})", "'source.query' is required"},
      {R"({"model": "m", "source": {"type": "csv", "path": "a"}, "sink": {"type": "sqlite", "path": "o.db"}})",
       "'sink.table' is required"},
      {R"({"model": "m", "source": {"type": "csv", "path": "a"}, "sink": {"type": "sqlite", "path": "o.db", "table": "x; DROP"}})",
       "'sink.table' must be letters"},
      {R"({"model": "m", "source": {"type": "csv", "path": "a"}, "sink": {"type": "csv", "path": "o"}})",
       "'key' is required"},
      {R"({"model": "m", "source": {"type": "csv", "path": "a"}, "sink": {"type": "csv", "path": "o"}, "key": "id"})",
       "'inputs' is required"},
      {R"({"model": "m", "source": {"type": "csv", "path": "a"}, "sink": {"type": "csv", "path": "o"}, "key": "id", "inputs": {}})",
       "at least one input"},
      {R"({"model": "m", "source": {"type": "csv", "path": "a"}, "sink": {"type": "csv", "path": "o"}, "key": "id", "inputs": {"x": []}})",
       "at least one column"},
      {R"({"model": "m", "source": {"type": "csv", "path": "a"}, "sink": {"type": "csv", "path": "o"}, "key": "id", "inputs": {"x": 3}})",
       "column name"},
      {R"({"model": "m", "source": {"type": "csv", "path": "a"}, "sink": {"type": "csv", "path": "o"}, "key": "id", "inputs": {"x": "a"}, "max_in_flight": 0})",
       "'max_in_flight' must be in"},
      {R"({"model": "m", "source": {"type": "csv", "path": "a"}, "sink": {"type": "csv", "path": "o"}, "key": "id", "inputs": {"x": "a"}, "commit_rows": "9"})",
       "'commit_rows' must be an integer"},
      {R"({"model": "m", "source": {"type": "csv", "path": "a"}, "sink": {"type": "csv", "path": "o"}, "key": "id", "inputs": {"x": "a"}, "outputs": ["y", "y"]})",
       "twice"},
      {R"({"model": "m", "surprise": 1})", "'surprise' is not a known field"},
      {R"({"model": "m", "source": {"type": "csv", "path": "a", "password": "x"}})",
       "'source.password' is not a known field"},
  };
  for (const auto& [json, want] : cases) {
    auto s = ParseJobSpec(json);
    ASSERT_FALSE(s.ok()) << json;
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument) << json;
    EXPECT_NE(s.status().message().find(want), std::string::npos) << json << " -> " << s.status().message();
  }
}

TEST(JobSpec, SqlIdentifiers) {
  EXPECT_TRUE(IsSqlIdentifier("preds_2026"));
  EXPECT_TRUE(IsSqlIdentifier("_x"));
  EXPECT_FALSE(IsSqlIdentifier(""));
  EXPECT_FALSE(IsSqlIdentifier("2x"));
  EXPECT_FALSE(IsSqlIdentifier("a.b"));
  EXPECT_FALSE(IsSqlIdentifier("a\"b"));
  EXPECT_FALSE(IsSqlIdentifier(std::string(64, 'a')));
}

}  // namespace
}  // namespace inferd::jobs
