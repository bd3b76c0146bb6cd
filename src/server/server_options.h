// ServerOptions: what `inferd serve` configures (cli/serve_command.cc); only
// the code that builds an InferenceServer includes it.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cluster/cluster_options.h"
#include "core/clock.h"
#include "jobs/jobs_config.h"
#include "manager/model_manager.h"
#include "manager/repository_source.h"
#include "server/front_end_policy.h"
#include "tracing/request_observer.h"

namespace inferd {

namespace cluster {
class ClusterStore;
}
class CpuLoad;
class Forwarder;
class SchedulerFactory;

struct ServerOptions {
  std::string model_repository;
  ModelControlMode control_mode = ModelControlMode::kNone;
  // kExplicit / kPoll: models to load at start-up ("*" = all; kPoll loads
  // all when empty).
  std::vector<std::string> startup_models;
  // Queue bound for models whose config sets no max_queue_size.
  size_t default_max_queue_size = 1024;
  // Intra-op threads for models without INTRA_OP_THREAD_COUNT.
  int default_intra_op_threads = 1;
  // Config parameters every model gets unless its config sets them
  // (--model-parameter KEY=VALUE).
  std::map<std::string, std::string> default_parameters;
  // kPoll: how often the repository is rescanned (0 = only PollRepository calls).
  std::chrono::milliseconds poll_interval{std::chrono::seconds(15)};
  // If true, /v2/health/ready also needs every repository model READY.
  bool strict_readiness = false;

  Residency residency = Residency::kEager;
  // kOnDemand: bytes all resident models may hold (0 = no budget). Models
  // are sized by ModelVersion::resident_bytes.
  uint64_t memory_budget_bytes = 0;
  // kOnDemand: a model is not evicted before it has been resident this long.
  Duration min_residency = std::chrono::seconds(1);
  // kOnDemand: threads loading models for waiting requests (loads of
  // different models run in parallel, one model loads once).
  int model_load_threads = 2;
  // kOnDemand: a repository of more models than this is indexed (each
  // model's config read) in the background once the server is ready, not
  // before (RepositorySource::Options::index_at_start_limit).
  size_t index_at_start_limit = 10000;
  // kOnDemand: longest a request waits for its model to load (a smaller
  // request `timeout` parameter wins); then DEADLINE_EXCEEDED.
  Duration load_wait = std::chrono::seconds(30);
  // Scheduler kinds (not owned; null = the built-in ones).
  const SchedulerFactory* schedulers = nullptr;
  // How busy the CPUs are, for adaptive batching (not owned; null = the
  // machine's, read from /proc/stat).
  CpuLoad* cpu_load = nullptr;
  // Where run-time control state (version labels) persists; "" = in memory
  // only. Start fails when the directory cannot be created or written.
  std::string control_state_dir;
  // Start fails when a model (or a version) of the start-up set failed to
  // load (Triton's --exit-on-error).
  bool exit_on_error = false;
  // Who may call which route and what a JSON body may hold
  // (server/front_end_policy.h). A null access policy: every route open.
  // Shared: whoever reloads the tokens file holds the policy too.
  FrontEndPolicy front_end;
  // Bytes of the response cache models with response_cache { enable: true }
  // use (Triton's --cache-config local,size=N); 0 = no cache.
  uint64_t response_cache_bytes = 0;
  // Shadow traffic: the most mirrored requests one shadow version runs or
  // queues at once; beyond it a request is not mirrored (counted skipped).
  int64_t shadow_max_in_flight = 16;
  // Batch jobs (POST /v2/jobs; jobs/job_manager.h): the operator's named
  // connections and allowed directories (--jobs-config; empty: every job that
  // names a path or a connection is refused), and how many run at once.
  // Job records persist in <control_state_dir>/jobs.
  jobs::JobsConfig jobs_config;
  int max_running_jobs = 2;
  // Hybrid serving (docs/hybrid.md): threads that look up precomputed
  // answers and write online ones back (each with its own connection per
  // table), and how many lookups may wait for one (then: a store error).
  int precomputed_lookup_threads = 2;
  size_t precomputed_max_queued = 1024;
  // Cluster mode (--cluster): the shared store (etcd; not owned, outlives the
  // server) and how this node joins. Null: a single node, no cluster.
  cluster::ClusterStore* cluster_store = nullptr;
  // How requests for models held elsewhere are forwarded (not owned; null:
  // never forwarded, every request is served here).
  Forwarder* forwarder = nullptr;
  cluster::ClusterOptions cluster;
  // Tracing (--trace-config) and the access log (--access-log): the
  // observer `serve` also gives the front ends (they report each request to
  // it); the server adds the trace stage to the pipeline and exports its
  // metrics. Null: both off.
  std::shared_ptr<const tracing::RequestObserver> observer;
};

}  // namespace inferd
