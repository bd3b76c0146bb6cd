// The request pipeline's stages (server/pipeline/request_pipeline.h), one
// file each, and BuildRequestPipeline, the one place that declares their
// order (pipeline_order.cc). A new request-path capability (forwarding to
// another node, tracing) is one more stage here.
//
// Thread-safety: every stage is immutable after construction and thread-safe.
// Ownership: the pointers the factories take are not owned and must outlive
// the pipeline; null ones switch their stage off.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>

#include "core/clock.h"
#include "server/pipeline/request_pipeline.h"

namespace inferd {

class ClusterService;
class Forwarder;
class HybridServing;
class LoraCatalog;
class ResponseCache;
namespace features {
class FeatureFetcher;
}

// Answers `st` (a bad request: 400) and counts a failure of kind "invalid"
// against the pinned version; kTaken. For the stages that check a request.
RequestStage::Verdict RefuseInvalid(RequestContext& ctx, Status st);

// Rejects a request whose pinned version's queue is full before any work is
// done for it (batch jobs' requests wait for room in the enqueue instead).
std::unique_ptr<RequestStage> MakeAdmissionStage();
// InferRequest::decode: a body that decodes by the pinned version's declared
// inputs (TF Serving's :predict, Triton's generate extension).
std::unique_ptr<RequestStage> MakeDecodeStage();
// The request's scheduling parameters (priority, timeout); a bad one is 400.
std::unique_ptr<RequestStage> MakeParametersStage();
// features.*: a request with the entity key and without the feature input
// waits for Redis and goes on with the input (docs/features.md).
std::unique_ptr<RequestStage> MakeFeatureStage(features::FeatureFetcher* fetcher);
// precomputed.*: a request with a key and no inputs only asks the prediction
// store (before validation: it has nothing to validate).
std::unique_ptr<RequestStage> MakePrecomputedKeyOnlyStage(HybridServing* hybrid,
                                                          const std::atomic<bool>* shutting_down);
// Checks the inputs against the pinned version's config; sets ctx->rows.
std::unique_ptr<RequestStage> MakeValidationStage();
// precomputed.*: a validated request with a key is looked up in the store
// first; a miss runs online ("source": "online", written back when set).
std::unique_ptr<RequestStage> MakePrecomputedStage(HybridServing* hybrid, const std::atomic<bool>* shutting_down);
// response_cache { enable: true }: a hit answers; a miss stores the answer.
std::unique_ptr<RequestStage> MakeCacheStage(ResponseCache* cache, Clock* clock);
// Output rules and the classification extension, applied to the answer.
std::unique_ptr<RequestStage> MakeAnswerRulesStage();
// The traffic policy's shadow runs a copy; the answers are compared after
// the client's was delivered (server/shadow_traffic.h).
std::unique_ptr<RequestStage> MakeShadowStage(Clock* clock, int64_t shadow_max_in_flight);

// What the enqueue asks the server when the pinned version retired between
// the routing and the enqueue (a reload, an eviction).
struct Rerouter {
  // The version that serves `request` now (the default one when
  // `asked_default`); errors say why none does.
  std::function<Result<std::shared_ptr<ModelVersion>>(const InferRequest& request, bool asked_default)> find;
  // Whether a request may wait for its model to load (on demand) after
  // `lookup` failed, and the wait itself.
  std::function<bool(const Status& lookup)> can_wait;
  std::function<void(std::unique_ptr<InferRequest>, ResponseSink, TimePoint arrival)> wait_for_load;
  const std::atomic<bool>* shutting_down = nullptr;
};
// The last stage: the pinned version's scheduler; if that version retired
// meanwhile, once more on the version that serves now (swaps lose no
// requests), or a wait for the model's load (on demand).
std::unique_ptr<RequestStage> MakeEnqueueStage(Rerouter rerouter);

// The routing pipeline runs first, before a request is resolved to a version
// (ctx->handle is empty there):
// Cluster mode: a request for a model another node holds goes there and its
// answer is relayed (server/cluster_service.h decides where; the Forwarder
// carries it); after every holder failed, it is served here.
std::unique_ptr<RequestStage> MakeForwardStage(ClusterService* cluster, Forwarder* forwarder, Clock* clock);
// The routing pipeline's last stage: `resolve` pins the version that serves
// the request and runs the request pipeline (InferenceServer::Resolve).
std::unique_ptr<RequestStage> MakeResolveStage(std::function<void(std::unique_ptr<RequestContext>)> resolve);
// [forward (cluster mode only)] -> resolve.
// A request whose model is a LoRA adapter's name goes to the adapter's base model with parameter lora_adapter.
std::unique_ptr<RequestStage> MakeLoraStage(const LoraCatalog* catalog);
std::unique_ptr<RequestPipeline> BuildRoutingPipeline(const LoraCatalog* loras, ClusterService* cluster,
                                                      Forwarder* forwarder, Clock* clock,
                                                      std::function<void(std::unique_ptr<RequestContext>)> resolve);

// What the stages need (see the factories above).
// Tracing on: a traced request's model span, ended with its answer.
std::unique_ptr<RequestStage> MakeTraceStage();

struct PipelineParts {
  Clock* clock = nullptr;
  bool tracing = false;  // the trace stage is in the pipeline
  const std::atomic<bool>* shutting_down = nullptr;
  features::FeatureFetcher* features = nullptr;
  HybridServing* hybrid = nullptr;
  ResponseCache* cache = nullptr;
  int64_t shadow_max_in_flight = 16;
  Rerouter rerouter;
};
// The pipeline, its stages in their order.
std::unique_ptr<RequestPipeline> BuildRequestPipeline(PipelineParts parts);

}  // namespace inferd
