// Decode: a body whose JSON carries no datatypes (TF Serving's :predict,
// Triton's generate extension) was read by its front end, which left the
// inputs to InferRequest::decode; they are decoded here by the declared
// inputs of the version the request is pinned to (under a traffic split,
// that version's). A body that does not decode is 400 ("invalid").
#include "server/pipeline/stages.h"

namespace inferd {
namespace {

class DecodeStage final : public RequestStage {
 public:
  const char* name() const override { return "decode"; }
  bool Traced(const RequestContext& ctx) const override { return ctx.request->decode != nullptr; }
  Verdict Process(std::unique_ptr<RequestContext>& ctx, const RequestPipeline&) const override {
    InferRequest& request = *ctx->request;
    if (!request.decode) return Verdict::kContinue;
    const ModelSpec& spec = ctx->handle.spec();
    Status st = request.RunDecode(ClientTensors(spec, spec.inputs));
    return st.ok() ? Verdict::kContinue : RefuseInvalid(*ctx, std::move(st));
  }
};

}  // namespace

std::unique_ptr<RequestStage> MakeDecodeStage() { return std::make_unique<DecodeStage>(); }

}  // namespace inferd
