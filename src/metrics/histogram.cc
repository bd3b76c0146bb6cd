#include "metrics/histogram.h"

#include <algorithm>
#include <bit>

namespace inferd {

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(new std::atomic<uint64_t>[bounds_.size() + 1]) {
  std::sort(bounds_.begin(), bounds_.end());
  for (size_t i = 0; i <= bounds_.size(); ++i) counts_[i].store(0, std::memory_order_relaxed);
}

void Histogram::Observe(double value) {
  const size_t i = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
  counts_[i].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  uint64_t old = sum_bits_.load(std::memory_order_relaxed);
  while (!sum_bits_.compare_exchange_weak(old, std::bit_cast<uint64_t>(std::bit_cast<double>(old) + value),
                                          std::memory_order_relaxed)) {
  }
}

Histogram::Snapshot Histogram::Take() const {
  Snapshot s;
  s.bounds = bounds_;
  uint64_t acc = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    acc += counts_[i].load(std::memory_order_relaxed);
    s.cumulative.push_back(acc);
  }
  s.count = acc;
  s.sum = std::bit_cast<double>(sum_bits_.load(std::memory_order_relaxed));
  return s;
}

std::vector<double> Histogram::LatencyMicrosBuckets() {
  return {10,    25,     50,     100,    250,     500,     1000,    2500,     5000,     10000,   25000,
          50000, 100000, 250000, 500000, 1000000, 2500000, 5000000, 10000000, 30000000, 60000000};
}

std::vector<double> Histogram::LoadSecondsBuckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120};
}

std::vector<double> Histogram::AgeSecondsBuckets() { return {1, 5, 15, 60, 300, 900, 3600, 4 * 3600, 24 * 3600}; }

std::vector<double> Histogram::BatchSizeBuckets(int max_batch_size) {
  std::vector<double> b;
  for (int v = 1; v < max_batch_size; v *= 2) b.push_back(v);
  b.push_back(std::max(1, max_batch_size));
  return b;
}

}  // namespace inferd
