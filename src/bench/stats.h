// Load-generator statistics: latency percentiles per measurement window,
// perf_analyzer-style stability detection, and Poisson arrival schedules.
// Pure functions and values; unit-tested on synthetic timings.
#pragma once

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace inferd::bench {

// One completed request.
struct Sample {
  double end_s = 0;       // completion time, seconds since the run started
  double latency_us = 0;  // send (or scheduled send, open loop) to response
  bool ok = true;
};

// Called once per finished request: its sample, and for a failed one what
// went wrong.
using SampleSink = std::function<void(const Sample& sample, const std::string& error)>;

struct Summary {
  uint64_t requests = 0;  // successful requests
  uint64_t errors = 0;
  double duration_s = 0;
  double throughput = 0;  // successful requests per second
  double p50_us = 0, p90_us = 0, p95_us = 0, p99_us = 0, max_us = 0, mean_us = 0;
};

// Nearest-rank percentile (p in [0,100]) of unsorted values; 0 for none.
double Percentile(std::vector<double> values, double p);

// Summarises the samples that completed in [from_s, to_s).
Summary Summarize(const std::vector<Sample>& samples, double from_s, double to_s);

// perf_analyzer's rule: the last `count` windows are stable when each one's
// throughput and p50 latency lie within `tolerance` (0.10 = 10%) of those
// windows' mean, and none is empty.
bool IsStable(const std::vector<Summary>& windows, int count, double tolerance);

// Arrival times (seconds from 0) of a Poisson process of `rate` per second
// up to `duration_s`, deterministic for a seed.
std::vector<double> PoissonArrivals(double rate, double duration_s, uint64_t seed);

}  // namespace inferd::bench
