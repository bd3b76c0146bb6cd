// InferenceServer: the one API every front end (HTTP, gRPC) calls. Front
// ends translate wire formats to these calls and map Status codes to their
// protocol at the edge; no request logic lives in them.
//
// It is a facade over the components that do the work: the ModelManager
// owns models and their lifecycle (manager/), the RepositorySource feeds it
// from the repository (start-up, poll), the RoutingPolicy picks the version
// a request goes to (routing/), the request pipeline's stages work on it
// (server/pipeline/), and each version's scheduler runs requests
// (scheduler/). Management calls are on admin() (server/admin_service.h);
// metrics come from the MetricsExporter. This header is the one front ends
// include: what the server owns is only forward-declared here, and
// ServerOptions lives in server/server_options.h (for the code that builds
// a server).
//
// Thread-safety: all public methods are thread-safe. InferAsync never runs
// model code on the calling thread; its callback runs exactly once, either
// synchronously (request rejected before queueing) or later on a model
// worker thread, and must not block.
//
// Ownership: the BackendRegistry and Clock are not owned and must outlive
// the server.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/clock.h"
#include "core/infer_request.h"
#include "core/request_submitter.h"
#include "core/status.h"
#include "manager/on_demand_loader.h"
#include "server/admin_executor.h"
#include "server/admin_service.h"
#include "server/front_end_policy.h"
#include "server/metrics_exporter.h"
#include "server/server_types.h"

namespace inferd {

namespace jobs {
class JobManager;
class JobStores;
}  // namespace jobs
struct ServerOptions;  // server/server_options.h
class BackendRegistry;
class ClusterService;
class ControlStateStore;
class CpuLoad;
class HybridServing;
class LoraCatalog;
class LoraService;
class ModelManager;
class ModelRepository;
class ModelVersion;
class PrometheusWriter;
class RepositorySource;
class ResponseCache;
class RolloutService;
class RoutingPolicy;
class RequestPipeline;
struct RequestContext;
struct Rerouter;
namespace features {
class FeatureFetcher;
}

class InferenceServer final : public RequestSubmitter {
 public:
  InferenceServer(ServerOptions options, const BackendRegistry* backends, Clock* clock);
  ~InferenceServer() override;

  // Loads the start-up models and logs a summary of every model. A model
  // that fails to load is logged and shown in the repository index; only an
  // unreadable repository (or, with exit_on_error, a failed model) fails Start.
  Status Start();
  // From any thread while Start runs (a stop signal during start-up): Start
  // loads no further model and returns Cancelled. Shutdown still follows.
  void AbandonStart();
  // Stops accepting inference (UNAVAILABLE), finishes accepted requests,
  // releases all models. Idempotent.
  void Shutdown();

  bool IsLive() const { return live_.load(); }
  bool IsReady() const;

  ServerMetadata GetServerMetadata() const;
  Result<ModelMetadata> GetModelMetadata(const std::string& name, const std::string& version) const;
  // OK(true/false) for a known model; NOT_FOUND for an unknown one.
  Result<bool> IsModelReady(const std::string& name, const std::string& version) const;
  Result<std::string> GetModelConfigJson(const std::string& name, const std::string& version) const;
  // `name` empty = all loaded models.
  Result<std::vector<ModelStatsSnapshot>> GetStatistics(const std::string& name, const std::string& version) const;

  // The version string a label points at (NOT_FOUND for an unknown label).
  Result<std::string> ResolveLabel(const std::string& name, const std::string& label) const;
  // Management: model control, labels, traffic, rollouts, jobs, cluster membership (server/admin_service.h).
  AdminService& admin() { return *admin_service_; }

  void InferAsync(std::unique_ptr<InferRequest> request, InferCallback callback);
  // Before decoding a request for (name, version): UNAVAILABLE when the
  // version it would go to refuses requests now (its queue is full), counted
  // as a rejection. OK otherwise, also when the lookup fails (InferAsync then
  // answers that). Cheap: lets front ends reject under overload without
  // spending CPU on the body.
  Status Admit(const std::string& name, const std::string& version) const;
  // The same with partial responses (models that answer in parts) going to
  // sink.partial before sink.final.
  void InferAsync(std::unique_ptr<InferRequest> request, ResponseSink sink);
  // A request about one model that is not an inference (its metadata,
  // config, statistics; TF Serving's status). Cluster mode: where it came
  // with its wire form (`wire` non-null: see InferRequest::wire) it goes where
  // an inference request for `name` would go, and `relayed` gets that node's
  // answer (InferResponse::relayed) or why none came. Otherwise -- a single
  // node, a model held or placed here, a request a peer forwarded here, no
  // copy that answered -- `here` runs: with OK at once, or, with
  // `wait_for_load` (metadata and config), as WhenResident below says.
  // Exactly one of them runs, once, on the calling thread, a loader's or a
  // forwarder's; neither may block.
  void RouteModelRead(const std::string& name, std::shared_ptr<const WireRequest> wire, bool wait_for_load,
                      std::function<void(const Status&)> here, InferCallback relayed);

  // What the front ends check before a call comes here: its token
  // (front_end().access->Check) and its JSON body's size (json_limits).
  const FrontEndPolicy& front_end() const;

  // A front end learned that a client went away before its answer (HTTP
  // connection closed, gRPC call or stream cancelled, deadline passed); its
  // requests are cancelled. Counted (inferd_client_cancellations_total).
  void CountClientCancellation() { client_cancellations_.fetch_add(1, std::memory_order_relaxed); }

  // Prometheus exposition of all model and server metrics.
  void WriteMetrics(PrometheusWriter& w) const { exporter_->Write(w); }

 private:
  // RequestSubmitter: how schedulers (ensembles), backends (BLS) and batch
  // jobs call models; reached only through that interface.
  void SubmitStream(std::unique_ptr<InferRequest> request, ResponseSink sink) override {
    InferAsync(std::move(request), std::move(sink));
  }
  void Submit(std::unique_ptr<InferRequest> request, InferCallback callback) override {
    InferAsync(std::move(request), std::move(callback));
  }
  // The serving version's config; a repository model that does not serve is
  // loaded first (made resident under on-demand residency).
  Result<ModelSpec> Describe(const std::string& model, const std::string& version) override;
  // Calls `then` once `name` can answer: at once (with OK) when it serves,
  // when residency is eager, or when it is not a repository model (the call
  // that follows answers why); under on-demand residency, for a model that is
  // not resident, after its load (bounded by load_wait, like a request's
  // wait): OK, or why it did not load (DEADLINE_EXCEEDED, UNAVAILABLE). For
  // the metadata and config routes (requests wait in InferAsync: a body that
  // needs the model's inputs is decoded by the pipeline). `then` runs on
  // the calling thread or a loader thread, exactly once; it must not block.
  void WhenResident(const std::string& name, std::function<void(const Status&)> then);

  // The serving version `version` ("" = default, or a number) of `name`
  // names, through the routing policy; errors say why nothing serves.
  // `shadow` (optional): where the traffic policy mirrors this request, if anywhere.
  Result<std::shared_ptr<ModelVersion>> FindVersion(const std::string& name, const std::string& version,
                                                    const InferRequest* request = nullptr,
                                                    std::shared_ptr<ModelVersion>* shadow = nullptr) const;
  // FindVersion; for a model that is not resident under on-demand residency
  // also starts its load (the caller answers "retry").
  Result<std::shared_ptr<ModelVersion>> FindVersionOrPrefetch(const std::string& name,
                                                              const std::string& version) const;
  // InferAsync's body (server/dispatch.cc): resolves the request into a
  // pinned version and runs the request pipeline (server/pipeline/).
  // `may_wait`: a request for a model that is not resident waits for its
  // load (on-demand), once.
  void Dispatch(std::unique_ptr<InferRequest> request, ResponseSink sink, TimePoint arrival, bool may_wait);
  // The routing pipeline's end (the request is served here): pins the
  // version and runs the request pipeline.
  void Resolve(std::unique_ptr<RequestContext> ctx);
  // The constructor's parts: the prediction stores and the feature fetcher
  // (from the jobs config's connections); then the services over what it
  // built (AdminService, MetricsExporter, the request pipeline).
  void OpenLookups();
  void WireServices();
  // What the pipeline's enqueue stage asks when the pinned version retired meanwhile.
  Rerouter MakeRerouter();
  bool CanWaitForLoad(const Status& lookup) const;
  void WaitForLoad(std::unique_ptr<InferRequest> request, ResponseSink sink, TimePoint arrival);
  void OnLoadDone(OnDemandLoader::Waiter waiter, const Status& status);

  const std::unique_ptr<const ServerOptions> options_;
  Clock* clock_;
  std::unique_ptr<ModelRepository> repository_;
  std::unique_ptr<RoutingPolicy> routing_;
  std::unique_ptr<ControlStateStore> state_;
  std::unique_ptr<CpuLoad> own_cpu_load_;      // when options_.cpu_load is null
  std::unique_ptr<LoraCatalog> lora_catalog_;  // outlives the models' schedulers, which read it
  std::unique_ptr<LoraService> loras_;
  std::unique_ptr<ModelManager> manager_;
  std::unique_ptr<RepositorySource> source_;
  AdminExecutor admin_;
  std::unique_ptr<RolloutService> rollouts_;
  std::unique_ptr<ResponseCache> cache_;  // null without --cache-config
  std::unique_ptr<jobs::JobManager> jobs_;
  // Hybrid serving (precomputed.*): null without sqlite/postgres connections in the jobs config.
  std::unique_ptr<jobs::JobStores> hybrid_stores_;
  std::unique_ptr<HybridServing> hybrid_;
  // Online feature lookup (features.*): null without redis connections in the jobs config.
  std::unique_ptr<features::FeatureFetcher> features_;
  // Cluster mode (--cluster): membership and status; null on a single node.
  std::unique_ptr<ClusterService> cluster_;
  // The parts above, seen from management calls and from the metrics exporter.
  std::unique_ptr<AdminService> admin_service_;
  std::unique_ptr<MetricsExporter> exporter_;
  // The request path's stages (server/pipeline/pipeline_order.cc); declared
  // after the parts its stages point at, so it is destroyed before them.
  std::unique_ptr<RequestPipeline> pipeline_;
  // Before it: forwarding (cluster mode), then Resolve.
  std::unique_ptr<RequestPipeline> routing_pipeline_;

  std::atomic<bool> live_{true};
  std::atomic<bool> started_{false};
  std::atomic<bool> stopping_{false};       // Shutdown began (not ready any more)
  std::atomic<bool> shutting_down_{false};  // the request path refuses new requests
  std::atomic<uint64_t> client_cancellations_{0};
};

}  // namespace inferd
