#include "bench/report.h"

#include <gtest/gtest.h>
#include <rapidjson/document.h>

namespace inferd::bench {
namespace {

ReportRow Row() {
  ReportRow r{.label = "m", .mode = "rate", .load = 100, .protocol = "v2-binary"};
  r.summary.requests = 1000;
  r.summary.duration_s = 10;
  r.summary.p99_us = 9000;
  return r;
}

TEST(BenchReport, HostStallsAppearOnlyWhenProbed) {
  ReportRow plain = Row();
  ReportRow probed = Row();
  probed.host_stalls.probed = true;
  probed.host_stalls.stalls = {{1.5, 1.6}, {3.25, 3.5}};
  probed.host_stalls.count = 2;
  probed.host_stalls.stalled_s = 0.35;
  probed.host_stalls.guard_s = 0.2;
  probed.host_stalls.outside.requests = 900;
  probed.host_stalls.outside.p99_us = 250;

  rapidjson::Document d;
  const std::string json = RenderJson({plain, probed}, MachineInfo{});
  ASSERT_FALSE(d.Parse(json.c_str()).HasParseError()) << json;
  const auto& rows = d["rows"];
  EXPECT_TRUE(rows[0]["host_stalls"].IsNull());
  const auto& h = rows[1]["host_stalls"];
  EXPECT_EQ(h["count"].GetInt(), 2);
  EXPECT_DOUBLE_EQ(h["stalled_s"].GetDouble(), 0.35);
  EXPECT_DOUBLE_EQ(h["guard_s"].GetDouble(), 0.2);
  EXPECT_EQ(h["outside"]["requests"].GetInt(), 900);
  EXPECT_DOUBLE_EQ(h["outside"]["p99_us"].GetDouble(), 250);
  ASSERT_EQ(h["stalls"].Size(), 2u);
  EXPECT_DOUBLE_EQ(h["stalls"][1][0].GetDouble(), 3.25);
  EXPECT_DOUBLE_EQ(h["stalls"][1][1].GetDouble(), 3.5);

  const std::string table = RenderTable({plain, probed});
  EXPECT_EQ(table.find("host stalls"), table.rfind("host stalls"));  // one line: the probed row's
  EXPECT_NE(table.find("host stalls: 2, 0.35 s of 10.00 s; requests sent outside them and 200 ms after: 900, p50 0.0 "
                       "us, p99 250.0 us"),
            std::string::npos)
      << table;
}

}  // namespace
}  // namespace inferd::bench
