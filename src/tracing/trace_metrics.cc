#include "tracing/trace_metrics.h"

namespace inferd::tracing {

void WriteTraceMetrics(PrometheusWriter& w, const RequestObserver& observer) {
  if (const TraceService* t = observer.traces()) {
    const TraceService::Counters c = t->counters();
    w.Family("inferd_traces_started_total", "counter",
             "Requests traced: chosen by the sampling rate, or asked for by a sampled traceparent");
    w.Sample("inferd_traces_started_total", {{"by", "rate"}}, static_cast<double>(c.traces_by_rate));
    w.Sample("inferd_traces_started_total", {{"by", "parent"}}, static_cast<double>(c.traces_propagated));
    w.Family("inferd_trace_invalid_traceparent_total", "counter",
             "traceparent headers that could not be read (the request was sampled as if it had none)");
    w.Sample("inferd_trace_invalid_traceparent_total", {}, static_cast<double>(c.invalid_traceparent));
    w.Family("inferd_trace_spans_exported_total", "counter", "Spans the OTLP collector accepted");
    w.Sample("inferd_trace_spans_exported_total", {}, static_cast<double>(c.exporter.exported));
    w.Family("inferd_trace_spans_dropped_total", "counter",
             "Spans dropped: the export queue was full (bsp_max_queue_size), or the collector did not take them");
    w.Sample("inferd_trace_spans_dropped_total", {{"reason", "queue_full"}},
             static_cast<double>(c.exporter.dropped_queue_full));
    w.Sample("inferd_trace_spans_dropped_total", {{"reason", "export_failed"}},
             static_cast<double>(c.exporter.dropped_send_failed));
    w.Family("inferd_trace_exports_total", "counter", "OTLP/HTTP requests sent to the collector, by result");
    w.Sample("inferd_trace_exports_total", {{"result", "ok"}},
             static_cast<double>(c.exporter.sends - c.exporter.send_failures));
    w.Sample("inferd_trace_exports_total", {{"result", "failed"}}, static_cast<double>(c.exporter.send_failures));
  }
  if (const AccessLog* log = observer.access_log()) {
    w.Family("inferd_access_log_lines_total", "counter", "Access-log lines, by outcome (dropped: the queue was full)");
    w.Sample("inferd_access_log_lines_total", {{"outcome", "written"}}, static_cast<double>(log->written()));
    w.Sample("inferd_access_log_lines_total", {{"outcome", "dropped"}}, static_cast<double>(log->dropped()));
  }
}

}  // namespace inferd::tracing
