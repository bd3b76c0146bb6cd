// The order of the request pipeline's stages, in one place. Why this order:
// - admission first: a request its version cannot queue costs nothing more;
// - a body that decodes by the pinned version's inputs next: every later
//   stage reads the decoded request;
// - the feature join before validation: it adds an input the config requires;
// - a key-only precomputed lookup before validation: it has no inputs;
// - the precomputed store before the cache: a store answer is never cached;
// - the cache after validation (its key covers normalized inputs) and before
//   rules: it stores the answer with rules and classification applied, which
//   the key covers;
// - the shadow last before the enqueue: it mirrors the request as it runs;
// - the model span (tracing on) first: every later stage's span is its child.
// Before all of them, the routing pipeline: a LoRA adapter's name resolved to
// its base model first (the base is what is placed and loaded), then forwarding to the node that holds
// the model (cluster mode) comes before the request is resolved to a local
// version, which a node that does not hold the model has not loaded.
#include "server/pipeline/stages.h"

namespace inferd {

std::unique_ptr<RequestPipeline> BuildRequestPipeline(PipelineParts parts) {
  std::vector<std::unique_ptr<RequestStage>> s;
  if (parts.tracing) s.push_back(MakeTraceStage());
  s.push_back(MakeAdmissionStage());
  s.push_back(MakeDecodeStage());
  s.push_back(MakeParametersStage());
  if (parts.features) s.push_back(MakeFeatureStage(parts.features));
  if (parts.hybrid) s.push_back(MakePrecomputedKeyOnlyStage(parts.hybrid, parts.shutting_down));
  s.push_back(MakeValidationStage());
  if (parts.hybrid) s.push_back(MakePrecomputedStage(parts.hybrid, parts.shutting_down));
  if (parts.cache) s.push_back(MakeCacheStage(parts.cache, parts.clock));
  s.push_back(MakeAnswerRulesStage());
  s.push_back(MakeShadowStage(parts.clock, parts.shadow_max_in_flight));
  s.push_back(MakeEnqueueStage(std::move(parts.rerouter)));
  return std::make_unique<RequestPipeline>(std::move(s));
}

std::unique_ptr<RequestPipeline> BuildRoutingPipeline(const LoraCatalog* loras, ClusterService* cluster,
                                                      Forwarder* forwarder, Clock* clock,
                                                      std::function<void(std::unique_ptr<RequestContext>)> resolve) {
  std::vector<std::unique_ptr<RequestStage>> s;
  if (loras) s.push_back(MakeLoraStage(loras));
  if (cluster && forwarder) s.push_back(MakeForwardStage(cluster, forwarder, clock));
  s.push_back(MakeResolveStage(std::move(resolve)));
  return std::make_unique<RequestPipeline>(std::move(s));
}

}  // namespace inferd
