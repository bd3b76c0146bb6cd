// The resolve stage, last in the routing pipeline: the request is served by
// this node; the server resolves it once into a pinned version (waiting,
// bounded, for a model that is not resident) and runs the request pipeline
// (InferenceServer::Resolve, server/dispatch.cc).
#include "server/pipeline/stages.h"

namespace inferd {
namespace {

class ResolveStage final : public RequestStage {
 public:
  explicit ResolveStage(std::function<void(std::unique_ptr<RequestContext>)> resolve) : resolve_(std::move(resolve)) {}
  const char* name() const override { return "resolve"; }
  Verdict Process(std::unique_ptr<RequestContext>& ctx, const RequestPipeline&) const override {
    resolve_(std::move(ctx));
    return Verdict::kTaken;
  }

 private:
  const std::function<void(std::unique_ptr<RequestContext>)> resolve_;
};

}  // namespace

std::unique_ptr<RequestStage> MakeResolveStage(std::function<void(std::unique_ptr<RequestContext>)> resolve) {
  return std::make_unique<ResolveStage>(std::move(resolve));
}

}  // namespace inferd
