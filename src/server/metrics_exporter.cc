// InferenceServer::WriteMetrics: the Prometheus view of the server.
//
// Two sets of names:
//  * Triton-compatible counters (nv_inference_*), so existing dashboards work:
//    cumulative counts and cumulative microseconds per {model,version};
//  * inferd_* histograms (request, queue, compute input/infer/output
//    durations in microseconds, batch sizes) and process gauges.
#include <unistd.h>

#include <fstream>

#include "server/inference_server.h"

namespace inferd {
namespace {

double ProcessRssBytes() {
  std::ifstream f("/proc/self/statm");
  long pages_total = 0, pages_resident = 0;
  if (!(f >> pages_total >> pages_resident)) return 0;
  return static_cast<double>(pages_resident) * static_cast<double>(sysconf(_SC_PAGESIZE));
}

struct CounterDef {
  const char* name;
  const char* help;
  double (*get)(const ModelStats&);
};

}  // namespace

void InferenceServer::WriteMetrics(PrometheusWriter& w) const {
  std::vector<std::shared_ptr<ModelVersion>> versions;
  size_t registered = 0;
  {
    std::shared_lock<std::shared_mutex> g(mu_);
    registered = models_.size();
    for (const auto& [n, e] : models_)
      for (const auto& [v, mv] : e.versions) versions.push_back(mv);
  }
  auto labels = [](const ModelStats& s) { return Labels{{"model", s.model()}, {"version", s.version()}}; };

  static const CounterDef kCounters[] = {
      {"nv_inference_request_success", "Number of successful inference requests",
       [](const ModelStats& s) { return static_cast<double>(s.success_count()); }},
      {"nv_inference_count", "Number of inferences performed (rows; a batch of k counts k)",
       [](const ModelStats& s) { return static_cast<double>(s.inference_count()); }},
      {"nv_inference_exec_count", "Number of model executions (batches) performed",
       [](const ModelStats& s) { return static_cast<double>(s.execution_count()); }},
      {"nv_inference_request_duration_us", "Cumulative end-to-end duration of successful requests (us)",
       [](const ModelStats& s) { return static_cast<double>(s.success().ns.load()) / 1e3; }},
      {"nv_inference_queue_duration_us", "Cumulative queue duration of successful requests (us)",
       [](const ModelStats& s) { return static_cast<double>(s.queue().ns.load()) / 1e3; }},
      {"nv_inference_compute_input_duration_us", "Cumulative compute input duration (us)",
       [](const ModelStats& s) { return static_cast<double>(s.compute_input().ns.load()) / 1e3; }},
      {"nv_inference_compute_infer_duration_us", "Cumulative compute infer duration (us)",
       [](const ModelStats& s) { return static_cast<double>(s.compute_infer().ns.load()) / 1e3; }},
      {"nv_inference_compute_output_duration_us", "Cumulative compute output duration (us)",
       [](const ModelStats& s) { return static_cast<double>(s.compute_output().ns.load()) / 1e3; }},
  };
  for (const auto& c : kCounters) {
    w.Family(c.name, "counter", c.help);
    for (const auto& mv : versions) w.Sample(c.name, labels(*mv->stats()), c.get(*mv->stats()));
  }

  w.Family("nv_inference_request_failure", "counter", "Number of failed inference requests, by reason");
  for (const auto& mv : versions) {
    for (int r = 0; r < static_cast<int>(FailureReason::kCount); ++r) {
      Labels l = labels(*mv->stats());
      l.emplace_back("reason", FailureReasonName(static_cast<FailureReason>(r)));
      w.Sample("nv_inference_request_failure", l,
               static_cast<double>(mv->stats()->failure_count(static_cast<FailureReason>(r))));
    }
  }
  w.Family("nv_inference_pending_request_count", "gauge", "Requests accepted and not yet completed");
  for (const auto& mv : versions)
    w.Sample("nv_inference_pending_request_count", labels(*mv->stats()), static_cast<double>(mv->stats()->pending()));

  struct HistDef {
    const char* name;
    const char* help;
    const Histogram& (ModelStats::*get)() const;
  };
  static const HistDef kHists[] = {
      {"inferd_request_duration_us", "End-to-end request duration of successful requests (us)",
       &ModelStats::request_us},
      {"inferd_queue_duration_us", "Time requests spent queued (us)", &ModelStats::queue_us},
      {"inferd_compute_input_duration_us", "Batch input preparation time (us)", &ModelStats::compute_input_us},
      {"inferd_compute_infer_duration_us", "Model execution time per batch (us)", &ModelStats::compute_infer_us},
      {"inferd_compute_output_duration_us", "Output preparation time per batch (us)", &ModelStats::compute_output_us},
      {"inferd_batch_size", "Rows per executed batch", &ModelStats::batch_size},
  };
  for (const auto& h : kHists) {
    w.Family(h.name, "histogram", h.help);
    for (const auto& mv : versions) w.HistogramSamples(h.name, labels(*mv->stats()), ((*mv->stats()).*h.get)().Take());
  }

  w.Family("inferd_models_registered", "gauge", "Models known to the server (loaded or not)");
  w.Sample("inferd_models_registered", {}, static_cast<double>(registered));
  w.Family("inferd_model_versions_loaded", "gauge", "Model versions loaded and serving");
  w.Sample("inferd_model_versions_loaded", {}, static_cast<double>(versions.size()));
  w.Family("process_resident_memory_bytes", "gauge", "Resident set size of the inferd process");
  w.Sample("process_resident_memory_bytes", {}, ProcessRssBytes());
}

}  // namespace inferd
