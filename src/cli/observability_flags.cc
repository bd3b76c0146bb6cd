#include "cli/observability_flags.h"

#include <spdlog/spdlog.h>

#include "tracing/trace_config.h"

namespace inferd::cli {

void AddObservabilityFlags(CLI::App* cmd, ObservabilityFlags* flags) {
  cmd->add_option("--trace-config", flags->trace_config,
                  "Tracing, as Triton's flag (repeatable): mode=opentelemetry, rate=N (one request in N; 0 = only "
                  "requests with a sampled traceparent), count=N, level=OFF|TIMESTAMPS, "
                  "opentelemetry,url=http://HOST:4318/v1/traces, opentelemetry,resource=KEY=VALUE, "
                  "opentelemetry,protocol=http/protobuf|http/json, opentelemetry,bsp_max_queue_size=N, "
                  "opentelemetry,bsp_max_export_batch_size=N, opentelemetry,bsp_schedule_delay=MS, "
                  "opentelemetry,export_timeout=MS (docs/observability.md)");
  cmd->add_option("--access-log", flags->access_log,
                  "Write one JSON line per API request to this file (appended; - = standard output); off by "
                  "default");
  cmd->add_option("--access-log-sample-rate", flags->access_log_sample_rate,
                  "Share of successful requests written to the access log (failed ones always are)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--trace-recent", flags->trace_recent,
                  "Traced requests kept in memory for the web console's traces page (at most 10 a second; 0 = none)")
      ->capture_default_str()
      ->check(CLI::Range(0, 10000));
  cmd->add_option("--console", flags->console, "Serve the web console at /console/ on the HTTP port (docs/console.md)")
      ->capture_default_str();
  cmd->add_option("--console-history-secs", flags->console_history_secs,
                  "Seconds of per-model live statistics the console's charts keep (one point a second)")
      ->capture_default_str()
      ->check(CLI::Range(10, 3600));
  cmd->add_option("--console-max-models", flags->console_max_models,
                  "Model versions the console's charts keep statistics for (those idle longest give way)")
      ->capture_default_str()
      ->check(CLI::Range(0, 10000));
}

Status ApplyObservabilityFlags(const ObservabilityFlags& flags, Clock* clock, ServerOptions* so) {
  std::shared_ptr<tracing::TraceService> traces;
  std::shared_ptr<tracing::AccessLog> access_log;
  if (!flags.trace_config.empty()) {
    auto config = tracing::ParseTraceConfig(flags.trace_config);
    if (!config.ok()) return config.status();
    for (const auto& note : config->notes) spdlog::warn("tracing: {}", note);
    config->recent_traces = flags.trace_recent;
    if (config->enabled) {
      auto created = tracing::TraceService::Create(*config, clock);
      if (!created.ok()) return created.status();
      traces = std::move(*created);
      spdlog::info("tracing: OpenTelemetry to {} ({}), {}", config->url,
                   config->encoding == tracing::TraceConfig::Encoding::kJson ? "JSON" : "protobuf",
                   config->rate == 0
                       ? std::string("only requests with a sampled traceparent")
                       : "one request in " + std::to_string(config->rate) +
                             (config->count >= 0 ? " (at most " + std::to_string(config->count) + ")" : std::string()));
    }
  }
  if (!flags.access_log.empty()) {
    tracing::AccessLogOptions o;
    o.path = flags.access_log;
    o.sample_rate = flags.access_log_sample_rate;
    auto log = tracing::AccessLog::Open(o);
    if (!log.ok()) return log.status();
    access_log = std::move(*log);
    spdlog::info("access log: {} (successful requests sampled at {})",
                 flags.access_log == "-" ? std::string("standard output") : flags.access_log,
                 flags.access_log_sample_rate);
  }
  if (traces || access_log) so->observer = std::make_shared<tracing::RequestObserver>(traces, access_log);
  return Status::OK();
}

}  // namespace inferd::cli
