#include "server/metrics_exporter.h"

#include <unistd.h>

#include <chrono>
#include <fstream>

#include "auth/access_policy.h"
#include "features/feature_fetcher.h"
#include "jobs/job_manager.h"
#include "manager/model_manager.h"
#include "server/cluster_service.h"
#include "server/hybrid_serving.h"
#include "server/response_cache.h"
#include "server/rollout_service.h"
#include "tracing/trace_metrics.h"

namespace inferd {
namespace {

Labels StatsLabels(const ModelStats& s) { return Labels{{"model", s.model()}, {"version", s.version()}}; }

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

namespace {

// Generative models, under vLLM's names (model_name as vLLM labels it, plus model and version).
void WriteLoraMetrics(PrometheusWriter& w, const std::vector<std::pair<Labels, const GenerativeStats*>>& gen);

void WriteGenerativeMetrics(PrometheusWriter& w, const std::vector<std::shared_ptr<ModelVersion>>& versions) {
  std::vector<std::pair<Labels, const GenerativeStats*>> gen;
  for (const auto& mv : versions) {
    if (const GenerativeStats* g = mv->stats()->generative()) {
      gen.emplace_back(Labels{{"model_name", mv->stats()->model()},
                              {"model", mv->stats()->model()},
                              {"version", mv->stats()->version()}},
                       g);
    }
  }
  if (gen.empty()) return;
  struct Hist {
    const char* name;
    const char* help;
    const Histogram GenerativeStats::*h;
  };
  static const Hist kHists[] = {
      {"vllm:time_to_first_token_seconds", "Time to first token (s)", &GenerativeStats::time_to_first_token_s},
      {"vllm:time_per_output_token_seconds", "Time between a request's consecutive output tokens (s)",
       &GenerativeStats::inter_token_latency_s},
      {"vllm:inter_token_latency_seconds", "Time between a request's consecutive output tokens (s)",
       &GenerativeStats::inter_token_latency_s},
      {"vllm:e2e_request_latency_seconds", "End-to-end latency of finished requests (s)",
       &GenerativeStats::e2e_latency_s},
      {"inferd_structured_output_compile_seconds", "Time to compile a structured output's grammar (cache misses, s)",
       &GenerativeStats::structured_compile_s},
  };
  for (const Hist& h : kHists) {
    w.Family(h.name, "histogram", h.help);
    for (const auto& [l, g] : gen) w.HistogramSamples(h.name, l, (g->*h.h).Take());
  }
  struct Series {
    const char* name;
    const char* type;
    const char* help;
    double (*get)(const GenerativeStats&);
  };
  static const Series kSeries[] = {
      {"vllm:prompt_tokens_total", "counter", "Prompt tokens of finished requests",
       [](const GenerativeStats& g) { return static_cast<double>(g.prompt_tokens.load()); }},
      {"vllm:generation_tokens_total", "counter", "Tokens generated",
       [](const GenerativeStats& g) { return static_cast<double>(g.generation_tokens.load()); }},
      {"vllm:num_requests_running", "gauge", "Requests in the running batch",
       [](const GenerativeStats& g) { return static_cast<double>(g.running.load()); }},
      {"vllm:num_requests_waiting", "gauge", "Requests waiting to be scheduled",
       [](const GenerativeStats& g) { return static_cast<double>(g.waiting.load()); }},
      {"vllm:kv_cache_usage_perc", "gauge", "Fraction of KV cache blocks in use (1 = full)",
       [](const GenerativeStats& g) { return g.kv_usage.load(); }},
      // The same under vLLM's older name, which the Gateway API Inference Extension's endpoint picker reads
      // by default (its model server protocol: KVCacheUtilization).
      {"vllm:gpu_cache_usage_perc", "gauge", "Fraction of KV cache blocks in use (1 = full; vLLM's older name)",
       [](const GenerativeStats& g) { return g.kv_usage.load(); }},
      {"vllm:prefix_cache_queries_total", "counter", "Prompt tokens looked up in the prefix cache",
       [](const GenerativeStats& g) { return static_cast<double>(g.prefix_queried_tokens.load()); }},
      {"vllm:prefix_cache_hits_total", "counter", "Prompt tokens found in the prefix cache",
       [](const GenerativeStats& g) { return static_cast<double>(g.prefix_hit_tokens.load()); }},
      {"vllm:num_preemptions_total", "counter", "Sequences preempted (KV cache full; recomputed later)",
       [](const GenerativeStats& g) { return static_cast<double>(g.preemptions.load()); }},
      {"inferd_kv_cache_blocks", "gauge", "KV cache blocks the model's budget holds",
       [](const GenerativeStats& g) { return static_cast<double>(g.kv_blocks.load()); }},
      {"inferd_structured_output_requests_total", "counter", "Requests with a structured output (schema, regex...)",
       [](const GenerativeStats& g) { return static_cast<double>(g.structured_requests.load()); }},
      {"inferd_structured_output_cache_hits_total", "counter", "Of which found their grammar compiled already",
       [](const GenerativeStats& g) { return static_cast<double>(g.structured_cache_hits.load()); }},
      {"inferd_structured_output_masks_total", "counter", "Token masks computed for structured outputs",
       [](const GenerativeStats& g) { return static_cast<double>(g.structured_masks.load()); }},
      {"inferd_structured_output_mask_seconds_total", "counter", "Time spent on those masks (s)",
       [](const GenerativeStats& g) { return static_cast<double>(g.structured_mask_ns.load()) / 1e9; }},
      {"vllm:spec_decode_num_drafts_total", "counter", "Speculative steps (drafts verified)",
       [](const GenerativeStats& g) { return static_cast<double>(g.spec_drafts.load()); }},
      {"vllm:spec_decode_num_draft_tokens_total", "counter", "Tokens drafted by prompt lookup",
       [](const GenerativeStats& g) { return static_cast<double>(g.spec_draft_tokens.load()); }},
      {"vllm:spec_decode_num_accepted_tokens_total", "counter", "Drafted tokens the model's sampling kept",
       [](const GenerativeStats& g) { return static_cast<double>(g.spec_accepted_tokens.load()); }},
  };
  for (const Series& s : kSeries) {
    w.Family(s.name, s.type, s.help);
    for (const auto& [l, g] : gen) w.Sample(s.name, l, s.get(*g));
  }
  WriteLoraMetrics(w, gen);
}

// LoRA adapters. The endpoint picker's LoRA affinity reads the adapters each server runs from
// vllm:lora_requests_info (labels: comma-separated adapter names; the value: when they last changed, the newest
// sample wins). A model that runs no adapters reports none and max_lora 0.
void WriteLoraMetrics(PrometheusWriter& w, const std::vector<std::pair<Labels, const GenerativeStats*>>& gen) {
  std::vector<std::pair<Labels, LoraStats::Snapshot>> snaps;
  for (const auto& [l, g] : gen) snaps.emplace_back(l, g->lora.snapshot());
  auto join = [](const std::vector<std::string>& names) {
    std::string out;
    for (const std::string& n : names) out += (out.empty() ? "" : ",") + n;
    return out;
  };
  w.Family("vllm:lora_requests_info", "gauge",
           "LoRA adapters running and waiting (labels), max_lora; the value is the time of the last change");
  for (const auto& [l, s] : snaps) {
    Labels lora = l;
    lora.emplace_back("max_lora", std::to_string(s.max_loras));
    lora.emplace_back("running_lora_adapters", join(s.running));
    lora.emplace_back("waiting_lora_adapters", join(s.waiting));
    w.Sample("vllm:lora_requests_info", lora, s.updated_s);
  }
  w.Family("inferd_lora_adapters_resident", "gauge", "LoRA adapters in host memory");
  for (const auto& [l, s] : snaps) w.Sample("inferd_lora_adapters_resident", l, static_cast<double>(s.resident));
  w.Family("inferd_lora_cache_bytes", "gauge",
           "Bytes the LoRA adapters in host memory take (lora_cache_bytes caps it)");
  for (const auto& [l, s] : snaps) w.Sample("inferd_lora_cache_bytes", l, static_cast<double>(s.bytes));
  w.Family("inferd_lora_load_seconds", "histogram", "Time to read a LoRA adapter into host memory (s)");
  for (const auto& [l, g] : gen) w.HistogramSamples("inferd_lora_load_seconds", l, g->lora.load_seconds.Take());
  struct PerAdapter {
    const char* name;
    const char* help;
    uint64_t LoraStats::Adapter::*field;
  };
  static const PerAdapter kPer[] = {
      {"inferd_lora_requests_total", "Finished requests of a LoRA adapter", &LoraStats::Adapter::requests},
      {"inferd_lora_prompt_tokens_total", "Prompt tokens of a LoRA adapter's finished requests",
       &LoraStats::Adapter::prompt_tokens},
      {"inferd_lora_generation_tokens_total", "Tokens generated with a LoRA adapter",
       &LoraStats::Adapter::generation_tokens},
      {"inferd_lora_loads_total", "Loads of a LoRA adapter into host memory", &LoraStats::Adapter::loads},
      {"inferd_lora_load_failures_total", "Failed loads of a LoRA adapter", &LoraStats::Adapter::load_failures},
      {"inferd_lora_evictions_total", "Evictions of a LoRA adapter from host memory", &LoraStats::Adapter::evictions},
  };
  for (const PerAdapter& p : kPer) {
    w.Family(p.name, "counter", p.help);
    for (const auto& [l, s] : snaps) {
      for (const auto& [adapter, a] : s.adapters) {
        Labels la = l;
        la.emplace_back("lora_adapter", adapter);
        w.Sample(p.name, la, static_cast<double>(a.*p.field));
      }
    }
  }
}

// Adaptive batching's estimates and padding's counters, for the versions that use them.
void WriteBatchingMetrics(PrometheusWriter& w, const std::vector<std::shared_ptr<ModelVersion>>& versions) {
  struct Def {
    const char* name;
    const char* type;
    const char* help;
    bool padding;  // else adaptive
    double (*get)(const BatchingStats&);
  };
  static const Def kDefs[] = {
      {"inferd_batching_arrival_rate", "gauge", "Adaptive batching: estimated arrivals (rows per second)", false,
       [](const BatchingStats& b) { return b.arrival_rows_per_s.load(); }},
      {"inferd_batching_cost_fixed_us", "gauge", "Adaptive batching: fitted cost per batch (us)", false,
       [](const BatchingStats& b) { return b.cost_fixed_us.load(); }},
      {"inferd_batching_cost_per_row_us", "gauge", "Adaptive batching: fitted cost per row (us)", false,
       [](const BatchingStats& b) { return b.cost_per_row_us.load(); }},
      {"inferd_batching_cost_per_position_us", "gauge", "Adaptive batching: fitted cost per padded position (us)",
       false, [](const BatchingStats& b) { return b.cost_per_position_us.load(); }},
      {"inferd_batching_cost_fitted", "gauge",
       "Adaptive batching: 1 once batch sizes varied enough to fit the cost (else no waiting)", false,
       [](const BatchingStats& b) { return b.cost_fitted.load() ? 1.0 : 0.0; }},
      {"inferd_batching_waits_total", "counter", "Adaptive batching: batches held back for more requests", false,
       [](const BatchingStats& b) { return static_cast<double>(b.waits.load()); }},
      {"inferd_batching_wait_us_total", "counter", "Adaptive batching: planned waits, summed (us)", false,
       [](const BatchingStats& b) { return static_cast<double>(b.wait_us_total.load()); }},
      {"inferd_batching_cpu_utilization", "gauge",
       "Adaptive batching: the CPUs' busy fraction its latest decision weighed (0 with cpu_aware false)", false,
       [](const BatchingStats& b) { return b.cpu_utilization.load(); }},
      {"inferd_padding_elements_total", "counter", "Padded inputs: elements sent to the model, padding included", true,
       [](const BatchingStats& b) { return static_cast<double>(b.padded_elements.load()); }},
      {"inferd_padding_real_elements_total", "counter", "Padded inputs: elements the requests carried", true,
       [](const BatchingStats& b) { return static_cast<double>(b.real_elements.load()); }},
  };
  std::vector<std::pair<Labels, const BatchingStats*>> used;
  for (const auto& mv : versions)
    if (const BatchingStats* b = mv->stats()->batching())
      used.emplace_back(Labels{{"model", mv->stats()->model()}, {"version", mv->stats()->version()}}, b);
  if (used.empty()) return;
  for (const Def& d : kDefs) {
    bool any = false;
    for (const auto& [l, b] : used) any = any || (d.padding ? b->padding.load() : b->adaptive.load());
    if (!any) continue;
    w.Family(d.name, d.type, d.help);
    for (const auto& [l, b] : used)
      if (d.padding ? b->padding.load() : b->adaptive.load()) w.Sample(d.name, l, d.get(*b));
  }
}

}  // namespace

void MetricsExporter::Write(PrometheusWriter& w) const {
  const Versions versions = s_.manager->ServingVersions();
  WriteRequestSeries(w, versions);
  WriteGenerativeMetrics(w, versions);
  WriteBatchingMetrics(w, versions);
  const uint64_t used = WriteModelSeries(w, versions);
  WriteShadowSeries(w, versions);
  WriteCacheSeries(w, versions);
  WriteControlSeries(w, used);
  WriteLifecycleSeries(w);
}

void MetricsExporter::WriteRequestSeries(PrometheusWriter& w, const Versions& versions) const {
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
    for (const auto& mv : versions) w.Sample(c.name, StatsLabels(*mv->stats()), c.get(*mv->stats()));
  }

  w.Family("nv_inference_request_failure", "counter", "Number of failed inference requests, by reason");
  for (const auto& mv : versions) {
    for (int r = 0; r < static_cast<int>(FailureReason::kCount); ++r) {
      Labels l = StatsLabels(*mv->stats());
      l.emplace_back("reason", FailureReasonName(static_cast<FailureReason>(r)));
      w.Sample("nv_inference_request_failure", l,
               static_cast<double>(mv->stats()->failure_count(static_cast<FailureReason>(r))));
    }
  }
  w.Family("nv_inference_pending_request_count", "gauge", "Requests accepted and not yet completed");
  for (const auto& mv : versions)
    w.Sample("nv_inference_pending_request_count", StatsLabels(*mv->stats()),
             static_cast<double>(mv->stats()->pending()));

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
    for (const auto& mv : versions)
      w.HistogramSamples(h.name, StatsLabels(*mv->stats()), ((*mv->stats()).*h.get)().Take());
  }
}

uint64_t MetricsExporter::WriteModelSeries(PrometheusWriter& w, const Versions& versions) const {
  const auto [registered, loaded] = s_.manager->ModelCounts();
  w.Family("inferd_models_registered", "gauge", "Models known to the server (loaded or not)");
  w.Sample("inferd_models_registered", {}, static_cast<double>(registered));
  w.Family("inferd_models_loaded", "gauge", "Models with at least one version loaded and serving");
  w.Sample("inferd_models_loaded", {}, static_cast<double>(loaded));
  w.Family("inferd_models_by_state", "gauge",
           "Models known to the server by their lifecycle state (LOADING, READY, UNLOADING, UNAVAILABLE, FAILED, "
           "EVICTED)");
  for (const auto& [state, n] : s_.manager->CountByState())
    w.Sample("inferd_models_by_state", {{"state", StateName(state)}}, static_cast<double>(n));
  w.Family("inferd_model_versions_loaded", "gauge", "Model versions loaded and serving");
  w.Sample("inferd_model_versions_loaded", {}, static_cast<double>(versions.size()));
  uint64_t used = 0;
  w.Family("inferd_model_resident_bytes", "gauge",
           "Memory a loaded model version holds (measured at load, or its memory_bytes parameter)");
  for (const auto& mv : versions) {
    used += mv->resident_bytes();
    w.Sample("inferd_model_resident_bytes", StatsLabels(*mv->stats()), static_cast<double>(mv->resident_bytes()));
  }
  w.Family("inferd_model_quantization", "gauge",
           "1 per version loaded with quantization \"int8\": the precision asked for and the one serving (fp32 when "
           "the accuracy guard rejected int8; docs/quantization.md)");
  for (const auto& mv : versions) {
    const QuantizationReport& q = mv->quantization();
    if (!q.requested_int8()) continue;
    Labels l = StatsLabels(*mv->stats());
    l.emplace_back("requested", q.requested);
    l.emplace_back("serving", q.serving);
    w.Sample("inferd_model_quantization", l, 1);
  }
  return used;
}

void MetricsExporter::WriteShadowSeries(PrometheusWriter& w, const Versions& versions) const {
  w.Family("inferd_shadow_requests_total", "counter",
           "Requests mirrored to this version (shadow traffic) by outcome: agreed or disagreed with the served "
           "answer, failed, or skipped (--shadow-max-in-flight were already running)");
  for (const auto& mv : versions) {
    const ModelStats& s = *mv->stats();
    if (s.shadow_agreed() + s.shadow_disagreed() + s.shadow_failed() + s.shadow_skipped() == 0) continue;
    for (const auto& [outcome, n] : {std::pair<const char*, uint64_t>{"agreed", s.shadow_agreed()},
                                     {"disagreed", s.shadow_disagreed()},
                                     {"failed", s.shadow_failed()},
                                     {"skipped", s.shadow_skipped()}}) {
      Labels l = StatsLabels(s);
      l.emplace_back("outcome", outcome);
      w.Sample("inferd_shadow_requests_total", l, static_cast<double>(n));
    }
  }
  w.Family("inferd_shadow_max_abs_diff", "gauge",
           "Largest absolute difference seen between this shadow version's outputs and the served ones");
  for (const auto& mv : versions) {
    const ModelStats& s = *mv->stats();
    if (s.shadow_agreed() + s.shadow_disagreed() == 0) continue;
    w.Sample("inferd_shadow_max_abs_diff", StatsLabels(s), s.shadow_max_abs_diff());
  }
}

void MetricsExporter::WriteCacheSeries(PrometheusWriter& w, const Versions& versions) const {
  // The response cache: Triton's per-model names, then the cache's own.
  struct CacheSeries {
    const char* name;
    const char* type;
    const char* help;
    double (*get)(const ModelStats&);
  };
  const CacheSeries cache_series[] = {
      {"nv_cache_num_hits_per_model", "counter", "Requests answered from the response cache",
       [](const ModelStats& s) { return static_cast<double>(s.cache_hit().count.load(std::memory_order_relaxed)); }},
      {"nv_cache_num_misses_per_model", "counter", "Requests the response cache could not answer (then stored)",
       [](const ModelStats& s) { return static_cast<double>(s.cache_miss().count.load(std::memory_order_relaxed)); }},
      {"nv_cache_hit_duration_per_model", "counter", "Cumulative time of cache hits (us)",
       [](const ModelStats& s) { return s.cache_hit().ns.load(std::memory_order_relaxed) / 1e3; }},
      {"nv_cache_miss_duration_per_model", "counter", "Cumulative cache lookup and insertion time of misses (us)",
       [](const ModelStats& s) { return s.cache_miss().ns.load(std::memory_order_relaxed) / 1e3; }},
  };
  for (const auto& c : cache_series) {
    w.Family(c.name, c.type, c.help);
    for (const auto& mv : versions)
      if (mv->spec().response_cache) w.Sample(c.name, StatsLabels(*mv->stats()), c.get(*mv->stats()));
  }
  {
    const ResponseCacheStats cs = s_.cache ? s_.cache->Stats() : ResponseCacheStats{};
    w.Family("inferd_response_cache_bytes", "gauge", "Bytes the response cache holds (keys and outputs)");
    w.Sample("inferd_response_cache_bytes", {}, static_cast<double>(cs.bytes));
    w.Family("inferd_response_cache_entries", "gauge", "Answers the response cache holds");
    w.Sample("inferd_response_cache_entries", {}, static_cast<double>(cs.entries));
    w.Family("inferd_response_cache_evictions_total", "counter", "Answers evicted to stay within --cache-config size");
    w.Sample("inferd_response_cache_evictions_total", {}, static_cast<double>(cs.evictions));
  }
}

void MetricsExporter::WriteControlSeries(PrometheusWriter& w, uint64_t used) const {
  w.Family("inferd_rollouts_total", "counter",
           "Progressive rollouts by outcome (started, promoted, rolled_back, aborted)");
  {
    const RolloutController::Counts rc = s_.rollouts->controller().counts();
    for (const auto& [outcome, n] : {std::pair<const char*, uint64_t>{"started", rc.started},
                                     {"promoted", rc.promoted},
                                     {"rolled_back", rc.rolled_back},
                                     {"aborted", rc.aborted}})
      w.Sample("inferd_rollouts_total", {{"outcome", outcome}}, static_cast<double>(n));
  }
  w.Family("inferd_batch_jobs", "gauge", "Batch jobs the server knows, by state (docs/batch.md)");
  {
    const auto by_state = s_.jobs->CountByState();
    for (auto st : {jobs::JobState::kQueued, jobs::JobState::kRunning, jobs::JobState::kSucceeded,
                    jobs::JobState::kFailed, jobs::JobState::kCancelled, jobs::JobState::kInterrupted}) {
      auto it = by_state.find(st);
      w.Sample("inferd_batch_jobs", {{"state", std::string(jobs::JobStateName(st))}},
               it == by_state.end() ? 0.0 : static_cast<double>(it->second));
    }
  }
  w.Family("inferd_memory_budget_bytes", "gauge", "--memory-budget (0 = none)");
  w.Sample("inferd_memory_budget_bytes", {}, static_cast<double>(s_.memory_budget_bytes));
  w.Family("inferd_memory_budget_used_bytes", "gauge", "Resident bytes of all loaded model versions");
  w.Sample("inferd_memory_budget_used_bytes", {}, static_cast<double>(used));
}

void MetricsExporter::WriteLifecycleSeries(PrometheusWriter& w) const {
  const LifecycleMetrics& lifecycle = s_.manager->metrics();
  struct LifecycleCounter {
    const char* name;
    const char* help;
    const std::atomic<uint64_t>& value;
  };
  const LifecycleCounter lifecycle_counters[] = {
      {"inferd_model_load_failures_total", "Model (version) loads that failed", lifecycle.load_failures},
      {"inferd_model_cold_starts_total", "Requests that waited for their model to load (on demand)",
       lifecycle.cold_starts},
      {"inferd_model_cold_start_timeouts_total",
       "Requests whose wait for an on-demand load ran past --model-load-wait-secs or their timeout",
       lifecycle.cold_start_timeouts},
      {"inferd_model_evictions_total", "Models unloaded to stay within the memory budget", lifecycle.evictions},
      {"inferd_model_over_budget_loads_total",
       "Loads after which the budget stayed exceeded (nothing evictable: pinned, busy or too young)",
       lifecycle.over_budget_loads},
  };
  for (const auto& c : lifecycle_counters) {
    w.Family(c.name, "counter", c.help);
    w.Sample(c.name, {}, static_cast<double>(c.value.load(std::memory_order_relaxed)));
  }
  struct LifecycleHist {
    const char* name;
    const char* help;
    const Histogram& h;
  };
  const LifecycleHist lifecycle_hists[] = {
      {"inferd_model_load_duration_seconds", "Time to load and warm up one model version", lifecycle.load_seconds},
      {"inferd_model_unload_duration_seconds", "Time to drain and release the versions of one unload or eviction",
       lifecycle.unload_seconds},
      {"inferd_model_eviction_age_seconds", "How long an evicted model had been resident",
       lifecycle.eviction_age_seconds},
  };
  for (const auto& h : lifecycle_hists) {
    w.Family(h.name, "histogram", h.help);
    w.HistogramSamples(h.name, {}, h.h.Take());
  }
  w.Family("inferd_client_cancellations_total", "counter",
           "Calls whose client went away before the answer (HTTP connection closed, gRPC call or stream cancelled or "
           "past its deadline); their queued requests never run");
  w.Sample("inferd_client_cancellations_total", {},
           static_cast<double>(s_.client_cancellations->load(std::memory_order_relaxed)));
  if (s_.cluster) s_.cluster->WriteMetrics(w);
  if (s_.access && s_.access->enabled()) {
    const auth::AccessPolicy::Counters c = s_.access->counters();
    w.Family("inferd_auth_refusals_total", "counter",
             "Calls refused by the access policy: no or an unknown token (unauthenticated), a token without the "
             "route's scope or model (permission_denied), over its request rate (rate_limited)");
    w.Sample("inferd_auth_refusals_total", {{"reason", "unauthenticated"}}, static_cast<double>(c.unauthenticated));
    w.Sample("inferd_auth_refusals_total", {{"reason", "permission_denied"}}, static_cast<double>(c.permission_denied));
    w.Sample("inferd_auth_refusals_total", {{"reason", "rate_limited"}}, static_cast<double>(c.rate_limited));
    w.Family("inferd_auth_token_reloads_total", "counter", "Re-reads of the tokens file, by result");
    w.Sample("inferd_auth_token_reloads_total", {{"result", "ok"}}, static_cast<double>(c.reloads));
    w.Sample("inferd_auth_token_reloads_total", {{"result", "failed"}}, static_cast<double>(c.reload_failures));
  }
  if (s_.observer) tracing::WriteTraceMetrics(w, *s_.observer);
  if (s_.hybrid) s_.hybrid->WriteMetrics(w);
  if (s_.features) s_.features->WriteMetrics(w);
  w.Family("process_resident_memory_bytes", "gauge", "Resident set size of the inferd process");
  w.Sample("process_resident_memory_bytes", {}, ProcessRssBytes());
}

}  // namespace inferd
