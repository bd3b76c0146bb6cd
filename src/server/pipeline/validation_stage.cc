// Validation: the inputs checked against the pinned version's config
// (server/request_validation.h); a request through a generative API (OpenAI)
// is refused by a model that is not generative. A bad request is 400 and
// counts as a failure of kind "invalid" (RefuseInvalid, shared with the
// decode and parameters stages).
#include "scheduler/scheduler_factory.h"
#include "server/pipeline/stages.h"
#include "server/request_validation.h"

namespace inferd {

RequestStage::Verdict RefuseInvalid(RequestContext& ctx, Status st) {
  ctx.handle.version->stats()->RecordFailure(FailureReason::kInvalid, 0);
  ctx.sink.final(std::move(st));
  return RequestStage::Verdict::kTaken;
}

namespace {

class ValidationStage final : public RequestStage {
 public:
  const char* name() const override { return "validation"; }
  Verdict Process(std::unique_ptr<RequestContext>& ctx, const RequestPipeline&) const override {
    const ModelSpec& spec = ctx->handle.spec();
    if (ctx->request->generative_api && SchedulerKind(spec) != "generative") {
      return RefuseInvalid(
          *ctx, Status::InvalidArgument("The model `" + spec.name + "` is not a generative model (platform " +
                                        (spec.platform.empty() ? spec.backend : spec.platform) + ")"));
    }
    Result<int64_t> rows = ValidateAndNormalize(spec, ctx->request.get());
    if (!rows.ok()) return RefuseInvalid(*ctx, rows.status());
    ctx->rows = *rows;
    return Verdict::kContinue;
  }
};

}  // namespace

std::unique_ptr<RequestStage> MakeValidationStage() { return std::make_unique<ValidationStage>(); }

}  // namespace inferd
