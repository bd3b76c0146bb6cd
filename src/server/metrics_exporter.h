// MetricsExporter: the Prometheus view of the server, apart from the request
// path. It reads snapshots only -- the manager's serving versions and counts,
// each version's ModelStats counters, the cache's, rollouts' and jobs'
// counters -- and never takes a lock the request path holds for long.
//
// Two sets of names:
//  * Triton-compatible counters (nv_inference_*), so existing dashboards work:
//    cumulative counts and cumulative microseconds per {model,version};
//  * inferd_* histograms (request, queue, compute input/infer/output
//    durations in microseconds, batch sizes) and process gauges.
// docs/metrics.md lists every family.
//
// Thread-safety: Write is const and thread-safe.
// Ownership: the sources are not owned and outlive the exporter; null
// optional sources (cache, hybrid, features) write nothing.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "metrics/prometheus.h"

namespace inferd {

class ClusterService;
class HybridServing;
class ModelManager;
class ModelVersion;
class ResponseCache;
class RolloutService;
namespace auth {
class AccessPolicy;
}
namespace features {
class FeatureFetcher;
}
namespace jobs {
class JobManager;
}
namespace tracing {
class RequestObserver;
}

class MetricsExporter {
 public:
  struct Sources {
    const ModelManager* manager = nullptr;
    const ResponseCache* cache = nullptr;  // null: zeros
    RolloutService* rollouts = nullptr;
    const jobs::JobManager* jobs = nullptr;
    const HybridServing* hybrid = nullptr;               // null: no hybrid series
    const features::FeatureFetcher* features = nullptr;  // null: no feature series
    uint64_t memory_budget_bytes = 0;
    const std::atomic<uint64_t>* client_cancellations = nullptr;
    const ClusterService* cluster = nullptr;             // null: no cluster series
    const auth::AccessPolicy* access = nullptr;          // null or no tokens: no auth series
    const tracing::RequestObserver* observer = nullptr;  // tracing and the access log
  };
  explicit MetricsExporter(Sources sources) : s_(sources) {}

  // Every family, in a fixed order.
  void Write(PrometheusWriter& w) const;

 private:
  using Versions = std::vector<std::shared_ptr<ModelVersion>>;
  // Per version: Triton's counters, failures by reason, pending, histograms.
  void WriteRequestSeries(PrometheusWriter& w, const Versions& versions) const;
  // Model counts and states, versions loaded, resident bytes (returns their sum).
  uint64_t WriteModelSeries(PrometheusWriter& w, const Versions& versions) const;
  void WriteShadowSeries(PrometheusWriter& w, const Versions& versions) const;
  void WriteCacheSeries(PrometheusWriter& w, const Versions& versions) const;
  // Rollouts, batch jobs, the memory budget.
  void WriteControlSeries(PrometheusWriter& w, uint64_t resident_bytes) const;
  // Loads, cold starts, evictions; client cancellations; hybrid and feature lookups; the process.
  void WriteLifecycleSeries(PrometheusWriter& w) const;

  const Sources s_;
};

}  // namespace inferd
