#include "bench/stats.h"

#include <algorithm>
#include <cmath>

namespace inferd::bench {

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  const double rank = std::ceil(p / 100.0 * static_cast<double>(v.size()));
  const size_t idx = static_cast<size_t>(std::clamp(rank, 1.0, static_cast<double>(v.size()))) - 1;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(idx), v.end());
  return v[idx];
}

Summary Summarize(const std::vector<Sample>& samples, double from_s, double to_s) {
  Summary s;
  s.duration_s = to_s - from_s;
  std::vector<double> lat;
  double sum = 0;
  for (const Sample& x : samples) {
    if (x.end_s < from_s || x.end_s >= to_s) continue;
    if (!x.ok) {
      ++s.errors;
      continue;
    }
    lat.push_back(x.latency_us);
    sum += x.latency_us;
  }
  s.requests = lat.size();
  if (s.duration_s > 0) s.throughput = static_cast<double>(s.requests) / s.duration_s;
  if (!lat.empty()) {
    s.mean_us = sum / static_cast<double>(lat.size());
    s.max_us = *std::max_element(lat.begin(), lat.end());
    s.p50_us = Percentile(lat, 50);
    s.p90_us = Percentile(lat, 90);
    s.p95_us = Percentile(lat, 95);
    s.p99_us = Percentile(lat, 99);
  }
  return s;
}

bool IsStable(const std::vector<Summary>& w, int count, double tolerance) {
  if (count <= 0 || static_cast<int>(w.size()) < count) return false;
  double tp = 0, lat = 0;
  for (size_t i = w.size() - static_cast<size_t>(count); i < w.size(); ++i) {
    if (w[i].requests == 0) return false;
    tp += w[i].throughput;
    lat += w[i].p50_us;
  }
  tp /= count;
  lat /= count;
  for (size_t i = w.size() - static_cast<size_t>(count); i < w.size(); ++i) {
    if (std::abs(w[i].throughput - tp) > tolerance * tp) return false;
    if (std::abs(w[i].p50_us - lat) > tolerance * lat) return false;
  }
  return true;
}

std::vector<double> PoissonArrivals(double rate, double duration_s, uint64_t seed) {
  std::vector<double> out;
  if (rate <= 0) return out;
  std::mt19937_64 rng(seed);
  std::exponential_distribution<double> gap(rate);
  for (double t = gap(rng); t < duration_s; t += gap(rng)) out.push_back(t);
  return out;
}

}  // namespace inferd::bench
