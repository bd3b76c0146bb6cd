// `serve`'s tracing, access-log and web-console flags (docs/observability.md,
// docs/console.md): --trace-config (Triton's, repeatable), --trace-recent,
// --access-log, --access-log-sample-rate, --console, --console-history-secs,
// --console-max-models.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/status.h"
#include "server/server_options.h"

namespace inferd::cli {

struct ObservabilityFlags {
  std::vector<std::string> trace_config;
  std::string access_log;  // "" = off, "-" = stdout
  double access_log_sample_rate = 1.0;
  size_t trace_recent = 50;  // traced requests kept for the console's traces page
  bool console = true;
  size_t console_history_secs = 300;
  size_t console_max_models = 200;
};

void AddObservabilityFlags(CLI::App* cmd, ObservabilityFlags* flags);
// Builds the TraceService and the AccessLog into `so->observer` (null when
// both are off; INVALID_ARGUMENT for a bad setting, an unopenable file); logs
// what is on.
Status ApplyObservabilityFlags(const ObservabilityFlags& flags, Clock* clock, ServerOptions* so);

}  // namespace inferd::cli
