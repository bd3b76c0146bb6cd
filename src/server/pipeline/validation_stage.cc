// The scheduling parameters and the inputs, checked against the pinned
// version's config (server/request_validation.h); a bad request is 400 and
// counts as a failure of kind "invalid".
#include "scheduler/scheduler_factory.h"
#include "server/pipeline/stages.h"
#include "server/request_validation.h"

namespace inferd {
namespace {

RequestStage::Verdict Refuse(RequestContext& ctx, Status st) {
  ctx.handle.version->stats()->RecordFailure(FailureReason::kInvalid, 0);
  ctx.sink.final(std::move(st));
  return RequestStage::Verdict::kTaken;
}

class ParametersStage final : public RequestStage {
 public:
  const char* name() const override { return "parameters"; }
  Verdict Process(std::unique_ptr<RequestContext>& ctx, const RequestPipeline&) const override {
    Status st = ApplySchedulingParameters(ctx->request.get());
    return st.ok() ? Verdict::kContinue : Refuse(*ctx, std::move(st));
  }
};

class ValidationStage final : public RequestStage {
 public:
  const char* name() const override { return "validation"; }
  Verdict Process(std::unique_ptr<RequestContext>& ctx, const RequestPipeline&) const override {
    const ModelSpec& spec = ctx->handle.spec();
    if (ctx->request->generative_api && SchedulerKind(spec) != "generative") {
      return Refuse(*ctx, Status::InvalidArgument("The model `" + spec.name + "` is not a generative model (platform " +
                                                  (spec.platform.empty() ? spec.backend : spec.platform) + ")"));
    }
    Result<int64_t> rows = ValidateAndNormalize(spec, ctx->request.get());
    if (!rows.ok()) return Refuse(*ctx, rows.status());
    ctx->rows = *rows;
    return Verdict::kContinue;
  }
};

}  // namespace

std::unique_ptr<RequestStage> MakeParametersStage() { return std::make_unique<ParametersStage>(); }
std::unique_ptr<RequestStage> MakeValidationStage() { return std::make_unique<ValidationStage>(); }

}  // namespace inferd
