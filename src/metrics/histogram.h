// Histogram: fixed upper bounds, lock-free Observe, Prometheus semantics
// (rendered cumulative with a +Inf bucket, _sum and _count).
//
// Thread-safety: Observe and Snapshot may run concurrently; a snapshot is
// consistent per field, not across fields (as with Prometheus client libs).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

namespace inferd {

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);

  void Observe(double value);

  struct Snapshot {
    std::vector<double> bounds;
    std::vector<uint64_t> cumulative;  // one per bound, then +Inf
    double sum = 0;
    uint64_t count = 0;
  };
  Snapshot Take() const;

  // Bucket layouts used across inferd.
  static std::vector<double> LatencyMicrosBuckets();  // 10us .. 60s, roughly x2.5 steps
  static std::vector<double> BatchSizeBuckets(int max_batch_size);
  static std::vector<double> LoadSecondsBuckets();  // 1 ms .. 2 min
  static std::vector<double> AgeSecondsBuckets();   // 1 s .. 1 day

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> counts_;  // bounds_.size() + 1
  std::atomic<uint64_t> sum_bits_{0};                // double, updated by CAS
  std::atomic<uint64_t> count_{0};
};

}  // namespace inferd
