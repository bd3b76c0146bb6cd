// The forward stage (cluster mode), first in the routing pipeline, before the
// request is resolved to a version of a local model: a request for a model
// this node does not hold goes to a peer that holds it (server/forward_call.h:
// the copies in order, the answer relayed unchanged, streams part by part);
// after the last peer the request is served here (loading the model if need
// be). Retryable conditions are never answered 500. A request another node
// forwarded here is never forwarded again.
#include "server/forward_call.h"
#include "server/pipeline/stages.h"

namespace inferd {
namespace {

class ForwardStage final : public RequestStage {
 public:
  ForwardStage(ClusterService* cluster, Forwarder* forwarder, Clock* clock) : parts_{cluster, forwarder, clock} {}
  const char* name() const override { return "forward"; }

  Verdict Process(std::unique_ptr<RequestContext>& ctx, const RequestPipeline& pipeline) const override {
    const InferRequest& r = *ctx->request;
    if (!r.wire || !r.forwarded_by.empty()) return Verdict::kContinue;
    ClusterService::Route route = parts_.cluster->RouteModel(r.model_name);
    if (route.local) return Verdict::kContinue;
    std::string model = r.model_name;
    std::shared_ptr<const WireRequest> wire = r.wire;
    ResponseSink sink = std::move(ctx->sink);
    // The request waits here, without its sink, until no copy took it.
    auto held = std::make_shared<std::unique_ptr<RequestContext>>(std::move(ctx));
    ForwardToCopies(parts_, std::move(model), std::move(wire), std::move(route.targets), std::move(sink),
                    [held, &pipeline](ResponseSink back) {
                      (*held)->sink = std::move(back);
                      pipeline.Continue(std::move(*held));  // served here
                    });
    return Verdict::kTaken;
  }

 private:
  const ForwardParts parts_;
};

}  // namespace

std::unique_ptr<RequestStage> MakeForwardStage(ClusterService* cluster, Forwarder* forwarder, Clock* clock) {
  return std::make_unique<ForwardStage>(cluster, forwarder, clock);
}

}  // namespace inferd
