#include "tune/load_sweep.h"

#include <gtest/gtest.h>

namespace inferd::tune {
namespace {

SweepPoint SweepAt(int c, double throughput, double p99_ms, uint64_t errors = 0) {
  SweepPoint p;
  p.concurrency = c;
  p.summary.requests = 100;
  p.summary.errors = errors;
  p.summary.throughput = throughput;
  p.summary.p99_us = p99_ms * 1e3;
  return p;
}

TEST(LoadSweepTest, DoublesUntilTheObjectiveSaturationOrTheLimit) {
  SweepRule rule{10, 64, 0.05};
  EXPECT_EQ(NextConcurrency({}, rule), 1);
  EXPECT_EQ(NextConcurrency({SweepAt(1, 100, 1)}, rule), 2);
  EXPECT_EQ(NextConcurrency({SweepAt(1, 100, 1), SweepAt(2, 190, 1.5)}, rule), 4);
  EXPECT_EQ(NextConcurrency({SweepAt(1, 100, 1), SweepAt(2, 190, 1.5), SweepAt(4, 195, 3)}, rule),
            0);                                                                      // +3%: saturated
  EXPECT_EQ(NextConcurrency({SweepAt(1, 100, 1), SweepAt(2, 190, 12)}, rule), 0);    // past 10 ms
  EXPECT_EQ(NextConcurrency({SweepAt(1, 100, 1), SweepAt(2, 190, 2, 1)}, rule), 0);  // errors
  rule.max_concurrency = 3;
  EXPECT_EQ(NextConcurrency({SweepAt(1, 100, 1), SweepAt(2, 190, 1.5)}, rule), 3);
  EXPECT_EQ(NextConcurrency({SweepAt(1, 100, 1), SweepAt(2, 190, 1.5), SweepAt(3, 290, 2)}, rule), 0);
}

TEST(LoadSweepTest, TheOperatingPointIsTheFastestWithinTheObjective) {
  EXPECT_EQ(OperatingPoint({SweepAt(1, 100, 1), SweepAt(2, 190, 1.5), SweepAt(4, 300, 12)}, 10), 1);
  EXPECT_EQ(OperatingPoint({SweepAt(1, 100, 11)}, 10), -1);
  EXPECT_EQ(OperatingPoint({SweepAt(1, 100, 1), SweepAt(2, 190, 1.5, 3)}, 10), 0);  // a point with errors never counts
  EXPECT_EQ(OperatingPoint({}, 10), -1);
}

}  // namespace
}  // namespace inferd::tune
