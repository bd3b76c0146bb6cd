// --trace-config: Triton's flag (docs/observability.md). Each value is
// `<setting>=<value>` (global: mode, rate, count, level) or
// `opentelemetry,<setting>=<value>` (url, resource, protocol,
// bsp_max_queue_size, bsp_max_export_batch_size, bsp_schedule_delay,
// export_timeout). Pure; fuzzed (fuzz/fuzz_tracing.cc).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"

namespace inferd::tracing {

struct TraceConfig {
  // mode=opentelemetry and a level other than OFF. Off: nothing is traced,
  // not even requests that carry a sampled traceparent.
  bool enabled = false;
  // One request in `rate` starts a trace (Triton's default 1000); 0: only
  // requests with a sampled parent context (those are always traced).
  uint64_t rate = 1000;
  // Traces still to start by the rate (-1: no limit); propagated ones do not count.
  int64_t count = -1;
  std::string url = "http://localhost:4318/v1/traces";
  enum class Encoding { kProtobuf, kJson };
  Encoding encoding = Encoding::kProtobuf;  // protocol=http/protobuf | http/json
  std::vector<std::pair<std::string, std::string>> resource = {{"service.name", "inferd"}};
  size_t max_queue_size = 2048;        // spans waiting for export; more are dropped and counted
  size_t max_export_batch_size = 512;  // spans per OTLP request
  std::chrono::milliseconds schedule_delay{5000};
  std::chrono::milliseconds export_timeout{10000};
  // inferd's own (--trace-recent, not a --trace-config setting): traced requests kept in memory for the web
  // console's traces page (tracing/recent_traces.h); 0 keeps none.
  size_t recent_traces = 50;
  // What was accepted but has no effect here (level=TENSORS), for the log.
  std::vector<std::string> notes;
};

// The settings in the order given (later ones win); INVALID_ARGUMENT names
// the setting that is wrong.
Result<TraceConfig> ParseTraceConfig(const std::vector<std::string>& settings);

// The collector's address from `url` (http://host:port/path; the scheme may
// be left out, as Triton's docs do; port 4318 and path /v1/traces by default).
struct CollectorAddress {
  std::string host;
  uint16_t port = 4318;
  std::string path = "/v1/traces";
};
Result<CollectorAddress> ParseCollectorUrl(const std::string& url);

}  // namespace inferd::tracing
