// `inferd tune MODEL` (docs/tune.md): finds the serving settings of one
// model that give the most throughput within a p99 objective on this
// machine. Each candidate is the model's own config.pbtxt with the settings
// applied (tune_space.h), served by a child `inferd serve` over a repository
// of links to the model's files (the model's folder is never written), and
// loaded with a closed-loop concurrency sweep (load_sweep.h); the search is
// hill climbing from the model's own config (hill_climb.h). The result says
// what was measured; tune_report.h renders it.
//
// Thread-safety: RunTune runs on the caller's thread (the load generator's
// threads are its own).
#pragma once

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "bench/report.h"
#include "tune/hill_climb.h"
#include "tune/load_sweep.h"
#include "tune/tune_space.h"

namespace inferd::tune {

struct TuneOptions {
  std::string repository;
  std::string model;
  std::string binary;  // the inferd executable the candidates are served by
  double p99_ms = 0;
  double time_budget_s = 600;
  int max_evaluations = 60;
  double min_gain = 0.05;
  int max_concurrency = 128;
  double warmup_s = 0.5;
  double window_s = 1.0;
  int max_windows = 4;
  int cores = 0;  // 0: this machine's
  std::vector<std::string> protocols = {"v2-json", "v2-binary", "grpc"};
  std::string start_protocol = "v2-json";
  bool try_int8 = true;
  std::set<std::string> search;  // the dimensions searched (tune_space.h); empty = all
  int batch_size = 1;            // rows per request
  std::string input_data;        // bench's --input-data format; "" = random inputs
  std::vector<std::string> serve_args;
  std::string work_dir;  // the candidates' repositories and logs
  double load_timeout_s = 300;
  uint64_t seed = 1;
  std::function<void(const std::string&)> progress;  // one line at a time
};

// One measured candidate.
struct Trial {
  Candidate candidate;
  std::vector<SweepPoint> sweep;
  int operating = -1;  // index into sweep; -1: the objective was not met
  Score score;
  std::string note;           // why it has no measurement, or what the server said (int8 refused)
  double start_s = 0;         // when its measurement began, seconds into the run
  double server_start_s = 0;  // the child server's start and load (0: reused)
};

struct TuneResult {
  bench::MachineInfo machine;
  int cores = 0;
  ModelFacts facts;
  double p99_ms = 0;
  int batch_size = 1;
  std::vector<Dimension> dims;
  std::vector<Trial> trials;  // the default first
  int best = -1;              // index into trials; -1: nothing met the objective
  std::string stop_reason;
  double elapsed_s = 0;
  std::string original_config;  // the model's config.pbtxt
};

Result<TuneResult> RunTune(const TuneOptions& options, const BackendRegistry& backends);

}  // namespace inferd::tune
