// Benchmark report rows and their table / CSV / JSON renderings, with the
// machine facts every report carries (CPU model, cores, versions).
#pragma once

#include <string>
#include <vector>

#include "bench/host_stall_probe.h"
#include "bench/stats.h"

namespace inferd::bench {

struct ServerBreakdown {
  bool available = false;
  double queue_us = 0, compute_input_us = 0, compute_infer_us = 0, compute_output_us = 0;  // per request
  double avg_batch_rows = 0;  // inference_count / execution_count
};

struct ReportRow {
  std::string label;     // free text, e.g. "inferd batching on"
  std::string mode;      // "concurrency" | "rate" | "in-process"
  double load = 0;       // concurrency, request rate or batch size
  std::string protocol;  // "v2-json", ..., or "in-process"
  int batch_size = 1;    // rows per request
  Summary summary;
  bool stable = false;
  int windows = 0;
  ServerBreakdown server;
  HostStalls host_stalls;  // probed only with --host-stall-probe
  std::string first_error;
};

struct MachineInfo {
  std::string cpu_model;
  int cores = 0;
  std::string inferd_version;
  std::string date;
  std::string host;
};
MachineInfo ReadMachineInfo();

std::string RenderTable(const std::vector<ReportRow>& rows);
std::string RenderCsv(const std::vector<ReportRow>& rows);
std::string RenderJson(const std::vector<ReportRow>& rows, const MachineInfo& machine);

}  // namespace inferd::bench
