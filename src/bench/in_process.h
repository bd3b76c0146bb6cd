// The in-process baseline: the model's forward() called through the same
// Backend interface the server uses, with no network, queue or codec. This is
// the physical limit the served numbers are compared with.
#pragma once

#include <string>
#include <vector>

#include "backends/backend.h"
#include "bench/report.h"
#include "bench/request_builder.h"

namespace inferd::bench {

struct InProcessOptions {
  std::string repository;
  std::string model;
  std::vector<int> batch_sizes = {1};
  int intra_op_threads = 1;
  double warmup_s = 1.0;
  double window_s = 2.0;  // measured once per batch size
  uint64_t seed = 1;
  RandomOptions random;  // --int-range, --constant-input
};

// One row per batch size: requests/s = forward() calls per second.
Result<std::vector<ReportRow>> RunInProcess(const InProcessOptions& options, const BackendRegistry& backends);

}  // namespace inferd::bench
