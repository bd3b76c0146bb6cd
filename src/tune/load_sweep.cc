#include "tune/load_sweep.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>

namespace inferd::tune {

namespace {

double OwnCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

bool Met(const SweepPoint& p, double p99_ms) {
  return p.summary.requests > 0 && p.summary.errors == 0 && p.summary.p99_us <= p99_ms * 1e3;
}

}  // namespace

int NextConcurrency(const std::vector<SweepPoint>& points, const SweepRule& rule) {
  if (points.empty()) return 1;
  const SweepPoint& last = points.back();
  if (!Met(last, rule.p99_ms)) return 0;  // past the objective (or failing): more load only adds latency
  if (last.concurrency >= rule.max_concurrency) return 0;
  if (points.size() >= 2) {
    double before = 0;
    for (size_t i = 0; i + 1 < points.size(); ++i) before = std::max(before, points[i].summary.throughput);
    if (last.summary.throughput < before * (1.0 + rule.min_gain)) return 0;  // saturated
  }
  return std::min(rule.max_concurrency, last.concurrency * 2);
}

int OperatingPoint(const std::vector<SweepPoint>& points, double p99_ms) {
  int best = -1;
  for (size_t i = 0; i < points.size(); ++i) {
    if (!Met(points[i], p99_ms)) continue;
    if (best < 0 || points[i].summary.throughput > points[static_cast<size_t>(best)].summary.throughput)
      best = static_cast<int>(i);
  }
  return best;
}

SweepPoint MeasureAt(bench::LoadOptions options, int concurrency, const std::function<double()>& server_cpu_s) {
  options.concurrency = concurrency;
  options.request_rate = 0;
  SweepPoint p;
  p.concurrency = concurrency;
  const double server0 = server_cpu_s ? server_cpu_s() : -1;
  const double client0 = OwnCpuSeconds();
  const auto t0 = std::chrono::steady_clock::now();
  bench::LoadResult r = bench::RunLoad(options);
  p.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double server1 = server_cpu_s ? server_cpu_s() : -1;
  p.server_cpu_s = server0 >= 0 && server1 >= 0 ? server1 - server0 : -1;
  p.client_cpu_s = OwnCpuSeconds() - client0;
  p.summary = r.summary;
  p.stable = r.stable;
  p.first_error = r.first_error;
  return p;
}

}  // namespace inferd::tune
