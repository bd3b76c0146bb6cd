// `inferd tune`'s outputs from a TuneResult: the cost of a measured point,
// the Markdown and JSON reports, the throughput-vs-p99 plot (PNG) and the
// chosen config.pbtxt. Pure renderings; tune_report_test.cc.
//
// Cost per 1M predictions, at `core_hour_usd` per core-hour:
// - at the measured utilisation: the CPU time the server used per
//   prediction (all its threads, from /proc) times the price -- what a
//   cluster that packs work by CPU use pays;
// - for the whole machine: its cores for the time one prediction takes at
//   the measured throughput -- what a reserved box costs.
//
// Thread-safety: free functions without shared state.
#pragma once

#include <string>

#include "core/status.h"
#include "tune/tuner.h"

namespace inferd::tune {

struct PointCost {
  double predictions_per_s = 0;
  double server_cores = -1;          // CPU seconds per second; < 0 unknown
  double client_cores = 0;           // the load generator's
  double usd_per_million_used = -1;  // < 0: utilisation unknown
  double usd_per_million_machine = 0;
};
PointCost CostOf(const SweepPoint& point, int batch_size, int cores, double core_hour_usd);

std::string RenderTuneMarkdown(const TuneResult& r, double core_hour_usd, const std::string& plot_file,
                               const std::string& config_file);
std::string RenderTuneJson(const TuneResult& r, double core_hour_usd);
// The plot: every point measured (grey), each candidate's operating point
// (blue), the model's own config's (green), the chosen one (red), the
// objective (dashed).
std::string RenderTunePlot(const TuneResult& r);
// The chosen candidate's config.pbtxt: the model's own text when the default
// won (with a header comment), else the edited config. An error when nothing
// met the objective.
Result<std::string> ChosenConfig(const TuneResult& r);
// One paragraph: the chosen settings against the model's own config, or why
// the model's own config stays.
std::string Verdict(const TuneResult& r);

}  // namespace inferd::tune
