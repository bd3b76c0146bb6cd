// The load side of one `inferd tune` candidate: closed-loop concurrency
// 1, 2, 4, ... until the p99 passes the objective, the throughput stops
// growing or the concurrency limit is reached (perf_analyzer's and Model
// Analyzer's sweep); the candidate's operating point is the highest
// throughput whose p99 met the objective with no errors. NextConcurrency and
// OperatingPoint are pure (load_sweep_test.cc); MeasureAt runs one level.
//
// Thread-safety: functions without shared state.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "bench/load_generator.h"

namespace inferd::tune {

struct SweepPoint {
  int concurrency = 0;
  bench::Summary summary;
  bool stable = false;
  double wall_s = 0;        // the run's length, warm-up included
  double server_cpu_s = 0;  // the server's CPU time over it (all threads); < 0 unknown
  double client_cpu_s = 0;  // this process's (the load generator's)
  std::string first_error;
};

struct SweepRule {
  double p99_ms = 0;
  int max_concurrency = 64;
  double min_gain = 0.05;  // a doubling that adds less than this is saturation
};

// The next concurrency to measure after `points`, or 0 to stop.
int NextConcurrency(const std::vector<SweepPoint>& points, const SweepRule& rule);

// The index of the operating point in `points`, or -1 when none met the objective.
int OperatingPoint(const std::vector<SweepPoint>& points, double p99_ms);

// One level: `options` with `concurrency`, the server's CPU time read before
// and after by `server_cpu_s` (seconds; negative when unknown).
SweepPoint MeasureAt(bench::LoadOptions options, int concurrency, const std::function<double()>& server_cpu_s);

}  // namespace inferd::tune
