// The Prometheus series of tracing and the access log (docs/metrics.md):
// traces started (by the rate, by a sampled parent), spans exported and
// dropped (queue full, collector failed), OTLP requests, unreadable
// traceparent headers, access-log lines written and dropped. Nothing when
// neither is on.
#pragma once

#include "metrics/prometheus.h"
#include "tracing/request_observer.h"

namespace inferd::tracing {

void WriteTraceMetrics(PrometheusWriter& w, const RequestObserver& observer);

}  // namespace inferd::tracing
