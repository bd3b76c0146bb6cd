#include "server/inference_server.h"

#include <spdlog/spdlog.h>

#include <map>

#include "features/feature_fetcher.h"
#include "jobs/job_manager.h"
#include "jobs/job_stores.h"
#include "jobs/redis/redis_store.h"
#include "manager/model_manager.h"
#include "manager/repository_source.h"
#include "repository/model_config.h"
#include "repository/repository.h"
#include "routing/routing_policy.h"
#include "server/cluster_service.h"
#include "server/hybrid_serving.h"
#include "server/lora_service.h"
#include "server/output_rules.h"
#include "server/pipeline/stages.h"
#include "server/response_cache.h"
#include "server/rollout_service.h"
#include "server/server_options.h"

namespace inferd {

namespace {
constexpr const char* kServerName = "inferd";
constexpr const char* kServerVersion = "0.1.0";

DurationSnapshot Snap(const DurationStat& d) {
  return {d.count.load(std::memory_order_relaxed), d.ns.load(std::memory_order_relaxed)};
}

// The model manager's options: the server's defaults for every version, and the checks of the parts a model's
// config may name (features.*, precomputed.*).
ModelManager::Options ManagerOptions(const ServerOptions& o, ControlStateStore* state, CpuLoad* cpu,
                                     RequestSubmitter* submitter, const HybridServing* hybrid,
                                     const features::FeatureFetcher* fetcher) {
  ModelManager::Options mo;
  mo.state = state;
  mo.residency = o.residency;
  mo.memory_budget_bytes = o.memory_budget_bytes;
  mo.min_residency = o.min_residency;
  mo.model_load_threads = o.model_load_threads;
  mo.version.default_max_queue_size = o.default_max_queue_size;
  mo.version.default_intra_op_threads = o.default_intra_op_threads;
  mo.version.default_parameters = o.default_parameters;
  mo.version.submitter = submitter;
  mo.version.schedulers = o.schedulers;
  mo.version.cpu_load = cpu;
  mo.version.check_spec = [hybrid, fetcher](const ModelSpec& spec) -> Status {
    if (spec.features && (fetcher == nullptr || !fetcher->HasConnection(spec.features->connection)))
      return Status::InvalidArgument("features.connection '" + spec.features->connection +
                                     "' is not a redis connection of the server's jobs config (--jobs-config)");
    if (!spec.precomputed) return Status::OK();
    if (hybrid == nullptr)
      return Status::InvalidArgument("precomputed.connection '" + spec.precomputed->connection +
                                     "': the server's jobs config (--jobs-config) has no connections");
    return hybrid->CheckModel(spec);
  };
  return mo;
}

}  // namespace

namespace {
// Front ends check every call against the policy: without one, an open one (no token needed anywhere).
ServerOptions WithAccessPolicy(ServerOptions o) {
  if (!o.front_end.access) o.front_end.access = auth::AccessPolicy::Open();
  return o;
}
}  // namespace

InferenceServer::InferenceServer(ServerOptions options, const BackendRegistry* backends, Clock* clock)
    : options_(std::make_unique<const ServerOptions>(WithAccessPolicy(std::move(options)))),
      clock_(clock),
      repository_(std::make_unique<ModelRepository>(options_->model_repository)),
      routing_(MakeTrafficRoutingPolicy()),
      state_(options_->control_state_dir.empty() ? MakeMemoryStateStore()
                                                 : MakeDirectoryStateStore(options_->control_state_dir)) {
  OpenLookups();
  if (options_->cpu_load == nullptr) own_cpu_load_ = MakeSystemCpuLoad();
  lora_catalog_ = std::make_unique<LoraCatalog>();
  loras_ = std::make_unique<LoraService>(lora_catalog_.get(), repository_.get());
  ModelManager::Options mo =
      ManagerOptions(*options_, state_.get(), options_->cpu_load ? options_->cpu_load : own_cpu_load_.get(), this,
                     hybrid_.get(), features_.get());
  mo.version.loras = lora_catalog_.get();
  mo.on_load_done = [this](OnDemandLoader::Waiter w, const Status& st) { OnLoadDone(std::move(w), st); };
  // Set below (cluster mode), before anything loads.
  mo.copies_elsewhere = [this](const std::string& model) { return cluster_ && cluster_->HasCopyElsewhere(model); };
  manager_ = std::make_unique<ModelManager>(std::move(mo), repository_.get(), backends, clock_);
  RepositorySource::Options so;
  so.control_mode = options_->control_mode;
  so.startup_models = options_->startup_models;
  so.poll_interval = options_->poll_interval;
  so.index_at_start_limit = options_->index_at_start_limit;
  so.after_poll = [this] { loras_->ScanRepository(); };
  source_ = std::make_unique<RepositorySource>(std::move(so), repository_.get(), manager_.get(), clock_);
  rollouts_ = std::make_unique<RolloutService>(manager_.get(), state_.get(), clock_);
  if (options_->response_cache_bytes > 0) cache_ = std::make_unique<ResponseCache>(options_->response_cache_bytes);
  jobs::JobManagerOptions jo;
  jo.state_dir = options_->control_state_dir.empty() ? "" : options_->control_state_dir + "/jobs";
  jo.max_running = options_->max_running_jobs;
  jobs_ = std::make_unique<jobs::JobManager>(std::move(jo), options_->jobs_config, this, clock_);
  if (options_->cluster_store != nullptr)
    cluster_ = std::make_unique<ClusterService>(options_->cluster, options_->cluster_store, manager_.get(),
                                                options_->memory_budget_bytes, clock_);
  WireServices();
}

void InferenceServer::OpenLookups() {
  // Any connection can be a prediction store (sqlite, postgres, redis).
  if (!options_->jobs_config.connections.empty()) {
    hybrid_stores_ = std::make_unique<jobs::JobStores>(options_->jobs_config);
    HybridServing::Options ho;
    ho.lookup_threads = options_->precomputed_lookup_threads;
    ho.max_queued = options_->precomputed_max_queued;
    hybrid_ = std::make_unique<HybridServing>(hybrid_stores_.get(), std::move(ho));
  }
  std::vector<redis::RedisEndpoint> redis;
  for (const auto& [name, c] : options_->jobs_config.connections)
    if (c.type == jobs::StoreType::kRedis) redis.push_back(jobs::RedisEndpointOf(name, c));
  if (!redis.empty())
    features_ = std::make_unique<features::FeatureFetcher>(std::move(redis), features::FeatureFetcher::Options{});
}

void InferenceServer::WireServices() {
  AdminService::Parts ap;
  ap.manager = manager_.get();
  ap.source = source_.get();
  ap.rollouts = rollouts_.get();
  ap.jobs = jobs_.get();
  ap.executor = &admin_;
  ap.control_mode = options_->control_mode == ModelControlMode::kExplicit ? "explicit"
                    : options_->control_mode == ModelControlMode::kPoll   ? "poll"
                                                                          : "none";
  ap.started = &started_;
  ap.stopping = &stopping_;
  ap.cluster = cluster_.get();
  ap.loras = loras_.get();
  admin_service_ = std::make_unique<AdminService>(ap);
  MetricsExporter::Sources ms;
  ms.manager = manager_.get();
  ms.cache = cache_.get();
  ms.rollouts = rollouts_.get();
  ms.jobs = jobs_.get();
  ms.hybrid = hybrid_.get();
  ms.features = features_.get();
  ms.memory_budget_bytes = options_->memory_budget_bytes;
  ms.client_cancellations = &client_cancellations_;
  ms.cluster = cluster_.get();
  ms.access = options_->front_end.access.get();
  ms.observer = options_->observer.get();
  exporter_ = std::make_unique<MetricsExporter>(ms);
  PipelineParts parts;
  parts.clock = clock_;
  parts.tracing = options_->observer && options_->observer->tracing();
  parts.shutting_down = &shutting_down_;
  parts.features = features_.get();
  parts.hybrid = hybrid_.get();
  parts.cache = cache_.get();
  parts.shadow_max_in_flight = options_->shadow_max_in_flight;
  parts.rerouter = MakeRerouter();
  routing_pipeline_ = BuildRoutingPipeline(lora_catalog_.get(), cluster_.get(), options_->forwarder, clock_,
                                           [this](std::unique_ptr<RequestContext> ctx) { Resolve(std::move(ctx)); });
  pipeline_ = BuildRequestPipeline(std::move(parts));
}

InferenceServer::~InferenceServer() { Shutdown(); }

Status InferenceServer::Start() {
  INFERD_RETURN_IF_ERROR(state_->Open());
  spdlog::info("control state (version labels) in {}", state_->Describe());
  loras_->ScanRepository();  // before the models load: requests naming an adapter find it once they are up
  INFERD_RETURN_IF_ERROR(source_->Start());
  rollouts_->Start();  // resumes rollouts a restart interrupted
  const ModelListing listing = manager_->ListModels();
  std::string failed;  // for --exit-on-error
  std::map<std::string, size_t> by_state;
  constexpr size_t kListed = 100;  // one line per model up to this many (10,000 on demand would flood the log)
  for (size_t i = 0; i < listing.models.size(); ++i) {
    const auto& m = listing.models[i];
    const ModelState state = manager_->ModelStateOf(m.name).state;
    const std::string shown = StateName(state);
    ++by_state[shown];
    std::string versions;
    double load_s = 0;
    for (const auto& v : m.versions) {
      versions += (versions.empty() ? "" : ",") + v.version + (v.state == "READY" ? "" : "(" + v.state + ")");
      load_s += v.load_seconds;
      if (v.state == "UNAVAILABLE") failed += "\n  " + m.name + " version " + v.version + ": " + v.reason;
    }
    if (m.versions.empty() && state == ModelState::kFailed) failed += "\n  " + m.name + ": " + m.reason;
    if (i < kListed) {
      spdlog::info("model {} {} versions [{}] backend {} loaded in {:.3f} s{}{}", m.name, shown, versions,
                   m.backend.empty() ? "-" : m.backend, load_s, m.reason.empty() ? "" : ": ", m.reason);
    }
  }
  std::string counts;
  for (const auto& [state, n] : by_state) counts += (counts.empty() ? "" : ", ") + std::to_string(n) + " " + state;
  spdlog::info("{} models in {}{}{}", listing.models.size(), repository_->root(), counts.empty() ? "" : ": ", counts);
  if (options_->exit_on_error && !failed.empty()) {
    return Status::FailedPrecondition("models failed to load and --exit-on-error is set:" + failed);
  }
  started_ = true;
  return jobs_->Start();  // resumes jobs a restart interrupted
}

void InferenceServer::AbandonStart() { source_->AbandonStart(); }

void InferenceServer::Shutdown() {
  if (stopping_.exchange(true)) return;
  if (cluster_) cluster_->Leave();  // peers stop routing here before anything drains
  admin_.Stop();                    // a running load finishes; queued management calls are cancelled
  // Running jobs stop at their next commit and resume after a restart
  // (recorded `interrupted`); their requests in flight are still served, so
  // the request path refuses new work only after them.
  jobs_->Shutdown();
  shutting_down_ = true;
  rollouts_->Stop();
  source_->Stop();
  if (features_) features_->Shutdown();  // running fetches finish; queued ones are answered
  if (hybrid_) hybrid_->Shutdown();      // running lookups finish; queued ones are answered
  manager_->Shutdown();                  // waiting requests answered, accepted ones finish
  live_ = false;
}

const FrontEndPolicy& InferenceServer::front_end() const { return options_->front_end; }

bool InferenceServer::IsReady() const {
  if (!started_.load() || stopping_.load()) return false;
  return !options_->strict_readiness || manager_->AllServing();
}

ServerMetadata InferenceServer::GetServerMetadata() const {
  return {kServerName,
          kServerVersion,
          {"model_repository", "schedule_policy", "model_configuration", "binary_tensor_data", "classification",
           "parameters", "statistics"}};
}

Result<std::shared_ptr<ModelVersion>> InferenceServer::FindVersion(const std::string& name, const std::string& version,
                                                                   const InferRequest* request,
                                                                   std::shared_ptr<ModelVersion>* shadow) const {
  auto serving = manager_->Serving(name);
  if (!serving) return manager_->NotServing(name);
  INFERD_ASSIGN_OR_RETURN(VersionRef ref, VersionRef::Parse(version));
  INFERD_ASSIGN_OR_RETURN(Route route, routing_->Resolve(*serving, ref, request));
  if (shadow) *shadow = std::move(route.shadow);
  return std::move(route.version);
}

Result<std::shared_ptr<ModelVersion>> InferenceServer::FindVersionOrPrefetch(const std::string& name,
                                                                             const std::string& version) const {
  auto mv = FindVersion(name, version);
  if (!mv.ok() && CanWaitForLoad(mv.status())) {
    manager_->LoadInBackground(name, std::nullopt);
    return Status::Unavailable("model '" + name + "' is not resident; it is loading now (on-demand residency): retry");
  }
  return mv;
}

Result<ModelMetadata> InferenceServer::GetModelMetadata(const std::string& name, const std::string& version) const {
  INFERD_ASSIGN_OR_RETURN(auto mv, FindVersionOrPrefetch(name, version));
  ModelMetadata md;
  md.name = name;
  if (auto serving = manager_->Serving(name))
    for (const auto& [v, _] : serving->versions) md.versions.push_back(std::to_string(v));
  const ModelSpec& spec = mv->spec();
  md.platform = spec.platform.empty() ? spec.backend : spec.platform;
  md.resolved_version = mv->version_string();
  md.max_batch_size = spec.max_batch_size;
  md.inputs = ClientTensors(spec, spec.inputs);
  md.outputs = ClientTensors(spec, spec.outputs);
  for (auto& t : ClientTensors(spec, RuleOutputSpecs(spec))) md.outputs.push_back(std::move(t));
  return md;
}

Result<bool> InferenceServer::IsModelReady(const std::string& name, const std::string& version) const {
  auto mv = FindVersion(name, version);
  if (mv.ok()) return !stopping_.load();
  if (mv.status().code() == StatusCode::kUnavailable) {
    // On demand, a model that is not resident is ready to serve: a request
    // loads it. Only a failed last load makes it not ready.
    if (!CanWaitForLoad(mv.status())) return false;
    return manager_->ModelStateOf(name).state != ModelState::kFailed;
  }
  return mv.status();
}

Result<std::string> InferenceServer::GetModelConfigJson(const std::string& name, const std::string& version) const {
  INFERD_ASSIGN_OR_RETURN(auto mv, FindVersionOrPrefetch(name, version));
  return mv->config_json();
}

Result<std::vector<ModelStatsSnapshot>> InferenceServer::GetStatistics(const std::string& name,
                                                                       const std::string& version) const {
  std::vector<std::shared_ptr<ModelVersion>> versions;
  if (name.empty()) {
    versions = manager_->ServingVersions();
  } else if (version.empty()) {
    auto serving = manager_->Serving(name);
    if (!serving) return manager_->NotServing(name);
    for (const auto& [v, mv] : serving->versions) versions.push_back(mv);
  } else {
    INFERD_ASSIGN_OR_RETURN(auto mv, FindVersion(name, version));
    versions.push_back(std::move(mv));
  }
  std::vector<ModelStatsSnapshot> out;
  for (const auto& mv : versions) {
    const ModelStats& s = *mv->stats();
    ModelStatsSnapshot snap;
    snap.name = s.model();
    snap.version = s.version();
    snap.last_inference_ms = s.last_inference_ms();
    snap.inference_count = s.inference_count();
    snap.execution_count = s.execution_count();
    snap.success = Snap(s.success());
    snap.fail = Snap(s.fail());
    snap.queue = Snap(s.queue());
    snap.compute_input = Snap(s.compute_input());
    snap.compute_infer = Snap(s.compute_infer());
    snap.compute_output = Snap(s.compute_output());
    snap.cache_hit = Snap(s.cache_hit());
    snap.cache_miss = Snap(s.cache_miss());
    snap.batch_stats = s.batch_stats();
    snap.request_us = s.request_us().Take();
    if (const BatchingStats* b = s.batching()) {
      BatchingSnapshot& o = snap.batching.emplace();
      o.adaptive = b->adaptive.load();
      o.padding = b->padding.load();
      o.arrival_rows_per_s = b->arrival_rows_per_s.load();
      o.cost_fixed_us = b->cost_fixed_us.load();
      o.cost_per_row_us = b->cost_per_row_us.load();
      o.cost_per_position_us = b->cost_per_position_us.load();
      o.cost_fitted = b->cost_fitted.load();
      o.cost_samples = b->cost_samples.load();
      o.waits = b->waits.load();
      o.wait_us_total = b->wait_us_total.load();
      o.cpu_utilization = b->cpu_utilization.load();
      o.padded_elements = b->padded_elements.load();
      o.real_elements = b->real_elements.load();
    }
    if (mv->quantization().requested_int8()) snap.quantization = mv->quantization();
    out.push_back(std::move(snap));
  }
  return out;
}

Result<ModelSpec> InferenceServer::Describe(const std::string& name, const std::string& version) {
  auto mv = FindVersion(name, version);
  if (!mv.ok()) {
    if (shutting_down_.load()) return Status::Unavailable("the server is shutting down");
    auto src = repository_->ReadModel(name);
    if (!src.ok() && src.status().code() == StatusCode::kNotFound) {
      return Status::NotFound("model '" + name + "' is not in the repository");
    }
    INFERD_RETURN_IF_ERROR(manager_->on_demand() ? manager_->EnsureResident(name)
                                                 : manager_->Reconcile(name, Aspiration{}));
    mv = FindVersion(name, version);
  }
  if (!mv.ok()) return mv.status();
  return (*mv)->spec();
}

Result<std::string> InferenceServer::ResolveLabel(const std::string& name, const std::string& label) const {
  INFERD_ASSIGN_OR_RETURN(int64_t v, manager_->ResolveLabel(name, label));
  return std::to_string(v);
}

}  // namespace inferd
