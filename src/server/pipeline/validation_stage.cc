// The request's own checks, on the pinned version: a body that decodes by
// that version's declared inputs is decoded, then the scheduling parameters
// and the inputs are checked against its config
// (server/request_validation.h). A bad request is 400 and counts as a
// failure of kind "invalid".
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

class DecodeStage final : public RequestStage {
 public:
  const char* name() const override { return "decode"; }
  Verdict Process(std::unique_ptr<RequestContext>& ctx, const RequestPipeline&) const override {
    InferRequest& request = *ctx->request;
    if (!request.decode) return Verdict::kContinue;
    const ModelSpec& spec = ctx->handle.spec();
    auto decode = std::move(request.decode);  // runs once, and releases what it holds (the body) after
    request.decode = nullptr;
    Status st = decode(ClientTensors(spec, spec.inputs), ctx->handle.version->version_string(), request);
    return st.ok() ? Verdict::kContinue : Refuse(*ctx, std::move(st));
  }
};

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

std::unique_ptr<RequestStage> MakeDecodeStage() { return std::make_unique<DecodeStage>(); }
std::unique_ptr<RequestStage> MakeParametersStage() { return std::make_unique<ParametersStage>(); }
std::unique_ptr<RequestStage> MakeValidationStage() { return std::make_unique<ValidationStage>(); }

}  // namespace inferd
