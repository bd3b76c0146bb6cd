#include "tune/tune_report.h"

#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include "repository/model_config.h"

namespace inferd::tune {
namespace {

constexpr const char* kReportConfig = R"pb(name: "m"
                                           backend: "onnxruntime"
                                           max_batch_size: 8 input
                                           [ {
                                             name: "x"
                                             data_type: TYPE_FP32
                                             dims: [ 4 ]
                                           }]
                                           # the user's comment
)pb";

SweepPoint Pt(int c, double thr, double p99_ms) {
  SweepPoint p;
  p.concurrency = c;
  p.summary.requests = 1000;
  p.summary.throughput = thr;
  p.summary.p99_us = p99_ms * 1e3;
  p.wall_s = 2;
  p.server_cpu_s = 3;  // 1.5 cores
  p.client_cpu_s = 1;
  return p;
}

Trial MakeTrial(const Candidate& c, std::vector<SweepPoint> sweep, double p99_ms) {
  Trial t;
  t.candidate = c;
  t.sweep = std::move(sweep);
  t.operating = OperatingPoint(t.sweep, p99_ms);
  if (t.operating >= 0)
    t.score = {true, t.sweep[static_cast<size_t>(t.operating)].summary.throughput, 1};
  else
    t.score = {false, 0, 50};
  return t;
}

TuneResult Result2() {
  TuneResult r;
  r.cores = 2;
  r.p99_ms = 10;
  r.original_config = kReportConfig;
  auto spec = ParseModelConfig(kReportConfig, "m", "test");
  EXPECT_TRUE(spec.ok());
  r.facts = FactsFromSpec(*spec, "onnxruntime", true, 1, "v2-json");
  TuneSpace space(r.facts, 2, {"v2-json", "grpc"});
  r.dims = space.dims();
  Candidate def = r.facts.current, better = r.facts.current;
  better.instances = 2;
  better.protocol = "grpc";
  r.trials.push_back(MakeTrial(def, {Pt(1, 100, 2), Pt(2, 150, 4), Pt(4, 155, 12)}, 10));
  r.trials.push_back(MakeTrial(better, {Pt(1, 120, 2), Pt(2, 230, 3), Pt(4, 300, 8)}, 10));
  r.best = 1;
  r.stop_reason = "converged";
  return r;
}

TEST(TuneReportTest, CostAtTheMeasuredUtilisationAndForTheMachine) {
  const PointCost c = CostOf(Pt(1, 100, 1), 2, 4, 0.036);  // 200 predictions/s, 1.5 server cores
  EXPECT_DOUBLE_EQ(c.predictions_per_s, 200);
  EXPECT_DOUBLE_EQ(c.server_cores, 1.5);
  EXPECT_DOUBLE_EQ(c.client_cores, 0.5);
  // $0.036 per core-hour = $1e-5 per core-second; 1.5 cores / 200 per s = 0.0075 core-s per prediction.
  EXPECT_NEAR(c.usd_per_million_used, 1e-5 * 0.0075 * 1e6, 1e-12);
  EXPECT_NEAR(c.usd_per_million_machine, 1e-5 * 4 / 200 * 1e6, 1e-12);
  SweepPoint unknown = Pt(1, 100, 1);
  unknown.server_cpu_s = -1;
  EXPECT_LT(CostOf(unknown, 1, 4, 0.036).usd_per_million_used, 0);
}

TEST(TuneReportTest, TheChosenConfigServesTheChosenSettings) {
  TuneResult r = Result2();
  auto text = ChosenConfig(r);
  ASSERT_TRUE(text.ok()) << text.status().message();
  EXPECT_EQ(text->rfind("# Written by `inferd tune`", 0), 0u) << *text;
  EXPECT_NE(text->find("2.00x the model's own config"), std::string::npos) << *text;
  auto spec = ParseModelConfig(*text, "m", "chosen");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(spec->instance_count, 2);
  // The default won: its own text, comments and all, under the header.
  r.best = 0;
  text = ChosenConfig(r);
  ASSERT_TRUE(text.ok());
  EXPECT_NE(text->find("# the user's comment"), std::string::npos);
  EXPECT_NE(text->find("was the best found"), std::string::npos);
  EXPECT_TRUE(ParseModelConfig(*text, "m", "chosen").ok());
  r.best = -1;
  EXPECT_FALSE(ChosenConfig(r).ok());
  EXPECT_NE(Verdict(r).find("No candidate met"), std::string::npos);
}

TEST(TuneReportTest, TheReportsCarryEveryCandidateAndTheRatio) {
  TuneResult r = Result2();
  const std::string md = RenderTuneMarkdown(r, 0.05, "plot.png", "out/config.pbtxt");
  EXPECT_NE(md.find("2.00x the model's own config (150 predictions/s)"), std::string::npos) << md;
  EXPECT_NE(md.find("![throughput vs p99](plot.png)"), std::string::npos);
  EXPECT_NE(md.find("**chosen**"), std::string::npos);
  EXPECT_NE(md.find("per 1M predictions"), std::string::npos);
  rapidjson::Document d;
  const std::string json = RenderTuneJson(r, 0.05);
  d.Parse(json.c_str());
  ASSERT_FALSE(d.HasParseError()) << json;
  EXPECT_EQ(d["chosen"].GetInt(), 1);
  EXPECT_NEAR(d["chosen_vs_default"].GetDouble(), 2.0, 1e-9);
  ASSERT_EQ(d["candidates"].Size(), 2u);
  EXPECT_EQ(d["candidates"][1]["points"].Size(), 3u);
  EXPECT_EQ(d["candidates"][1]["settings"]["protocol"], "grpc");
  EXPECT_EQ(d["candidates"][0]["operating_point"].GetInt(), 1);
  EXPECT_GT(d["candidates"][1]["points"][2]["usd_per_million_used"].GetDouble(), 0);
  EXPECT_EQ(d["search"]["candidates_measured"].GetInt(), 2);
}

TEST(TuneReportTest, ThePlotIsAPng) {
  TuneResult r = Result2();
  const std::string png = RenderTunePlot(r);
  EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_GT(png.size(), 1000u);
  r.trials.clear();  // nothing measured still draws the axes
  r.best = -1;
  EXPECT_EQ(RenderTunePlot(r).substr(1, 3), "PNG");
}

}  // namespace
}  // namespace inferd::tune
