#include "core/cpu_load.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

namespace inferd {
namespace {

const TimePoint kLoadT0 = TimePoint(std::chrono::seconds(100));
using std::chrono::milliseconds;

constexpr std::string_view kStat =
    "cpu  300 0 100 1600 0 0 0 0 0 0\n"
    "cpu0 100 0 50 800 0 0 0 0 0 0\n"
    "cpu1 200 0 50 790 10 0 0 0 0 0\n"
    "intr 12345 0 0\n"
    "ctxt 999\n";

TEST(ParseProcStat, SumsTheCpusAskedFor) {
  auto all = ParseProcStat(kStat, {});
  ASSERT_TRUE(all);
  EXPECT_EQ(all->busy, 400u);
  EXPECT_EQ(all->total, 400u + 1600u);
  auto one = ParseProcStat(kStat, {1});
  ASSERT_TRUE(one);
  EXPECT_EQ(one->busy, 250u);
  EXPECT_EQ(one->total, 1050u);  // iowait counts as idle
}

TEST(ParseProcStat, RejectsWhatIsNotProcStat) {
  EXPECT_FALSE(ParseProcStat("", {}));
  EXPECT_FALSE(ParseProcStat("cpu  1 2 3 4\n", {}));                        // only the total line
  EXPECT_FALSE(ParseProcStat(kStat, {7}));                                  // no such CPU
  EXPECT_FALSE(ParseProcStat("cpu0 1 2\n", {}));                            // too few fields
  EXPECT_FALSE(ParseProcStat("cpu0 1 x 3 4\n", {}));                        // not a number
  EXPECT_FALSE(ParseProcStat("cpu0 99999999999999999999999 0 0 0\n", {}));  // overflow
}

TEST(ParseProcStat, ReadsThisMachine) {
  std::ifstream in("/proc/stat");
  ASSERT_TRUE(in);
  std::ostringstream text;
  text << in.rdbuf();
  auto t = ParseProcStat(text.str(), {});
  ASSERT_TRUE(t);
  EXPECT_GT(t->total, 0u);
  EXPECT_LE(t->busy, t->total);
  EXPECT_EQ(MakeSystemCpuLoad()->Utilization(kLoadT0), 0);  // no window yet
}

// Ticks handed out by hand: each Read() returns the next entry.
struct ScriptedTicks {
  std::vector<CpuTicks> ticks;
  size_t next = 0;
  int reads = 0;
  std::optional<CpuTicks> Read() {
    ++reads;
    if (next >= ticks.size()) return std::nullopt;
    return ticks[next++];
  }
};

TEST(SampledCpuLoad, MeasuresTheBusyFractionBetweenSamples) {
  ScriptedTicks s{{{0, 0}, {90, 100}, {180, 200}}};
  SampledCpuLoad load([&] { return s.Read(); }, milliseconds(100), milliseconds(500));
  EXPECT_EQ(load.Utilization(kLoadT0), 0);
  EXPECT_EQ(load.Utilization(kLoadT0 + milliseconds(50)), 0);  // not due: no read
  EXPECT_EQ(s.reads, 1);
  EXPECT_NEAR(load.Utilization(kLoadT0 + milliseconds(100)), 0.9, 1e-12);  // first window taken whole
  EXPECT_NEAR(load.Utilization(kLoadT0 + milliseconds(200)), 0.9, 1e-12);
  EXPECT_EQ(s.reads, 3);
}

TEST(SampledCpuLoad, SmoothsAndFollowsAChange) {
  ScriptedTicks s;
  uint64_t busy = 0, total = 0;
  s.ticks.push_back({busy, total});
  for (int i = 0; i < 5; ++i) s.ticks.push_back({busy += 90, total += 100});   // 0.9 busy
  for (int i = 0; i < 30; ++i) s.ticks.push_back({busy += 10, total += 100});  // then 0.1
  SampledCpuLoad load([&] { return s.Read(); }, milliseconds(100), milliseconds(500));
  TimePoint t = kLoadT0;
  for (int i = 0; i <= 5; ++i, t += milliseconds(100)) load.Utilization(t);
  EXPECT_NEAR(load.Utilization(t - milliseconds(100)), 0.9, 1e-9);
  const double after_one = load.Utilization(t);  // one 0.1 window: moves part of the way
  EXPECT_LT(after_one, 0.9);
  EXPECT_GT(after_one, 0.5);
  for (int i = 0; i < 29; ++i) load.Utilization(t += milliseconds(100));
  EXPECT_NEAR(load.Utilization(t), 0.1, 0.01);  // 3 s later: the new level
}

TEST(SampledCpuLoad, KeepsItsValueWhenTheSourceFailsOrGoesBackwards) {
  ScriptedTicks s{{{0, 0}, {50, 100}, {10, 20}}};  // the third read: counters went back
  SampledCpuLoad load([&] { return s.Read(); });
  load.Utilization(kLoadT0);
  EXPECT_NEAR(load.Utilization(kLoadT0 + milliseconds(100)), 0.5, 1e-12);
  EXPECT_NEAR(load.Utilization(kLoadT0 + milliseconds(200)), 0.5, 1e-12);  // backwards: ignored
  EXPECT_NEAR(load.Utilization(kLoadT0 + milliseconds(300)), 0.5, 1e-12);  // no reading: kept
}

}  // namespace
}  // namespace inferd
