#include "jobs/row_source.h"

#include <gtest/gtest.h>

#include "testing/temp_dir.h"

namespace inferd::jobs {
namespace {

std::vector<std::string> Texts(const std::vector<Cell>& cells) {
  std::vector<std::string> out;
  for (const auto& c : cells) out.push_back(std::holds_alternative<std::monostate>(c) ? "<null>" : CellText(c));
  return out;
}

TEST(CsvRecord, QuotesCommasNewlinesAndEmptyFields) {
  const std::string text = "a,\"b,c\",\"say \"\"hi\"\"\",,\"\"\r\n\"two\nlines\",x\n";
  size_t pos = 0;
  std::vector<Cell> f;
  ASSERT_TRUE(ParseCsvRecord(text, &pos, &f).value());
  EXPECT_EQ(Texts(f), (std::vector<std::string>{"a", "b,c", "say \"hi\"", "<null>", ""}));
  ASSERT_TRUE(ParseCsvRecord(text, &pos, &f).value());
  EXPECT_EQ(Texts(f), (std::vector<std::string>{"two\nlines", "x"}));
  EXPECT_FALSE(ParseCsvRecord(text, &pos, &f).value());
}

TEST(CsvRecord, MalformedQuotesAreErrors) {
  for (std::string text : {"a\"b,c\n", "\"a\"b,c\n", "\"never closes\n"}) {
    size_t pos = 0;
    std::vector<Cell> f;
    EXPECT_FALSE(ParseCsvRecord(text, &pos, &f).ok()) << text;
  }
}

TEST(CsvSource, ReadsRowsWithOrdinalsAndReportsBadRecords) {
  testing::TempDir dir;
  ASSERT_TRUE(dir.Write("in.csv", "\xEF\xBB\xBFid,x,y\n1,2,3\n\n2,\"4\",5\n3,6\n4,7\"q,8\n5,9,10"));
  auto src = OpenCsvSource(dir.Join("in.csv"));
  ASSERT_TRUE(src.ok()) << src.status().message();
  EXPECT_EQ((*src)->columns(), (std::vector<std::string>{"id", "x", "y"}));
  Row row;
  std::vector<std::pair<int64_t, std::string>> seen;  // ordinal, first cell or error
  for (;;) {
    auto got = (*src)->Next(&row);
    ASSERT_TRUE(got.ok());
    if (!*got) break;
    seen.emplace_back(row.ordinal, row.error.empty() ? CellText(row.cells[0]) : "error: " + row.error);
  }
  ASSERT_EQ(seen.size(), 5u);  // the blank line is skipped
  EXPECT_EQ(seen[0], (std::pair<int64_t, std::string>{0, "1"}));
  EXPECT_EQ(seen[1], (std::pair<int64_t, std::string>{1, "2"}));
  EXPECT_NE(seen[2].second.find("has 2 fields, the header 3"), std::string::npos) << seen[2].second;
  EXPECT_NE(seen[3].second.find("quote inside an unquoted field"), std::string::npos) << seen[3].second;
  EXPECT_EQ(seen[4], (std::pair<int64_t, std::string>{4, "5"}));  // the last line has no newline
}

TEST(CsvSource, LongRecordsAcrossReadChunks) {
  testing::TempDir dir;
  std::string big(300000, 'z');
  ASSERT_TRUE(dir.Write("in.csv", "id,v\nk,\"" + big + "\"\nk2,w\n"));
  auto src = OpenCsvSource(dir.Join("in.csv"));
  ASSERT_TRUE(src.ok());
  Row row;
  ASSERT_TRUE((*src)->Next(&row).value());
  EXPECT_EQ(CellText(row.cells[1]), big);
  ASSERT_TRUE((*src)->Next(&row).value());
  EXPECT_EQ(CellText(row.cells[1]), "w");
  EXPECT_FALSE((*src)->Next(&row).value());
}

TEST(CsvSource, MissingOrEmptyFilesAreErrors) {
  testing::TempDir dir;
  EXPECT_EQ(OpenCsvSource(dir.Join("nope.csv")).status().code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(dir.Write("empty.csv", ""));
  EXPECT_NE(OpenCsvSource(dir.Join("empty.csv")).status().message().find("empty"), std::string::npos);
}

TEST(JsonlSource, TypesColumnsAndBadLines) {
  testing::TempDir dir;
  ASSERT_TRUE(dir.Write("in.jsonl",
                        "{\"id\": 7, \"v\": [1, 2.5], \"s\": \"x\", \"b\": true}\n"
                        "\n"
                        "{\"v\": 3.25, \"id\": \"k\", \"extra\": 1}\n"
                        "not json\n"
                        "[1]\n"));
  auto src = OpenJsonlSource(dir.Join("in.jsonl"));
  ASSERT_TRUE(src.ok()) << src.status().message();
  EXPECT_EQ((*src)->columns(), (std::vector<std::string>{"id", "v", "s", "b"}));
  Row row;
  ASSERT_TRUE((*src)->Next(&row).value());
  EXPECT_EQ(std::get<int64_t>(row.cells[0]), 7);
  EXPECT_EQ(std::get<NumberArray>(row.cells[1]).values, (std::vector<double>{1, 2.5}));
  EXPECT_EQ(std::get<std::string>(row.cells[2]), "x");
  EXPECT_EQ(std::get<int64_t>(row.cells[3]), 1);
  ASSERT_TRUE((*src)->Next(&row).value());
  EXPECT_EQ(row.ordinal, 1);
  EXPECT_EQ(std::get<std::string>(row.cells[0]), "k");
  EXPECT_EQ(std::get<double>(row.cells[1]), 3.25);
  EXPECT_TRUE(std::holds_alternative<std::monostate>(row.cells[2]));
  ASSERT_TRUE((*src)->Next(&row).value());
  EXPECT_NE(row.error.find("malformed JSON"), std::string::npos);
  ASSERT_TRUE((*src)->Next(&row).value());
  EXPECT_NE(row.error.find("not an object"), std::string::npos);
  EXPECT_FALSE((*src)->Next(&row).value());
}

TEST(JsonlSource, NumberArraysFlattenAndOthersStayJson) {
  testing::TempDir dir;
  ASSERT_TRUE(dir.Write("in.jsonl",
                        "{\"a\": [[1, 2], [3.5]], \"b\": [1, \"x\"], \"c\": [9007199254740993], \"d\": {\"k\": 1}}\n"));
  auto src = OpenJsonlSource(dir.Join("in.jsonl"));
  ASSERT_TRUE(src.ok());
  Row row;
  ASSERT_TRUE((*src)->Next(&row).value());
  EXPECT_EQ(std::get<NumberArray>(row.cells[0]).values, (std::vector<double>{1, 2, 3.5}));
  EXPECT_EQ(CellText(row.cells[0]), "[1,2,3.5]");
  EXPECT_EQ(std::get<JsonText>(row.cells[1]).text, "[1,\"x\"]");
  EXPECT_EQ(std::get<JsonText>(row.cells[2]).text, "[9007199254740993]");  // beyond a double's integers
  EXPECT_EQ(std::get<JsonText>(row.cells[3]).text, "{\"k\":1}");
}

}  // namespace
}  // namespace inferd::jobs
