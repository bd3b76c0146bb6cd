// BatchingStats: what adaptive batching currently estimates and what padding
// costs, for the metrics and statistics endpoints (docs/batching.md).
// Written by the model's scheduler, read by exporters.
//
// Thread-safety: atomics; readers may see one field newer than another.
#pragma once

#include <atomic>
#include <cstdint>

namespace inferd {

struct BatchingStats {
  // Adaptive batching (batching.mode adaptive).
  std::atomic<bool> adaptive{false};
  std::atomic<double> arrival_rows_per_s{0};
  std::atomic<double> cost_fixed_us{0};         // a: per batch
  std::atomic<double> cost_per_row_us{0};       // b: per row
  std::atomic<double> cost_per_position_us{0};  // c: per padded position (padded models)
  std::atomic<bool> cost_fitted{false};
  std::atomic<uint64_t> cost_samples{0};
  std::atomic<uint64_t> waits{0};          // batches held back to let more requests arrive
  std::atomic<uint64_t> wait_us_total{0};  // the planned waits, summed
  std::atomic<double> cpu_utilization{0};  // the CPUs' busy fraction its latest decision weighed
  // Padding (batching.pad_inputs): elements the padded inputs hold in executed
  // batches, and how many of them were the requests' own.
  std::atomic<bool> padding{false};
  std::atomic<uint64_t> padded_elements{0};
  std::atomic<uint64_t> real_elements{0};
};

}  // namespace inferd
