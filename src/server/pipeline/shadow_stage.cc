// The traffic policy's shadow (docs/rollout.md): the shadow version runs a
// copy of the request; its answer is compared with the client's after that
// was delivered (server/shadow_traffic.h).
#include "server/pipeline/stages.h"
#include "server/shadow_traffic.h"

namespace inferd {
namespace {

class ShadowStage final : public RequestStage {
 public:
  ShadowStage(Clock* clock, int64_t max_in_flight) : clock_(clock), max_in_flight_(max_in_flight) {}
  const char* name() const override { return "shadow"; }
  bool Traced(const RequestContext& ctx) const override { return ctx.handle.shadow != nullptr; }
  Verdict Process(std::unique_ptr<RequestContext>& ctx, const RequestPipeline&) const override {
    if (!ctx->handle.shadow) return Verdict::kContinue;
    ctx->sink.final = MirrorRequest(*ctx->request, std::move(ctx->handle.shadow), std::move(ctx->sink.final), *clock_,
                                    max_in_flight_);
    return Verdict::kContinue;
  }

 private:
  Clock* const clock_;
  const int64_t max_in_flight_;
};

}  // namespace

std::unique_ptr<RequestStage> MakeShadowStage(Clock* clock, int64_t shadow_max_in_flight) {
  return std::make_unique<ShadowStage>(clock, shadow_max_in_flight);
}

}  // namespace inferd
