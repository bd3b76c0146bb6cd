// Parameters: the request's scheduling hints (parameters "priority" and
// "timeout", server/request_validation.h); a bad one is 400 ("invalid").
#include "server/pipeline/stages.h"
#include "server/request_validation.h"

namespace inferd {
namespace {

class ParametersStage final : public RequestStage {
 public:
  const char* name() const override { return "parameters"; }
  Verdict Process(std::unique_ptr<RequestContext>& ctx, const RequestPipeline&) const override {
    Status st = ApplySchedulingParameters(ctx->request.get());
    return st.ok() ? Verdict::kContinue : RefuseInvalid(*ctx, std::move(st));
  }
};

}  // namespace

std::unique_ptr<RequestStage> MakeParametersStage() { return std::make_unique<ParametersStage>(); }

}  // namespace inferd
