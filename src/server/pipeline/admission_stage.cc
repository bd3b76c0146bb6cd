// Admission: the pinned version's scheduler says whether it can queue one
// more request (a full queue answers 503 / UNAVAILABLE before any work).
#include "server/pipeline/stages.h"

namespace inferd {
namespace {

class AdmissionStage final : public RequestStage {
 public:
  const char* name() const override { return "admission"; }
  Verdict Process(std::unique_ptr<RequestContext>& ctx, const RequestPipeline&) const override {
    // A batch job's requests wait for room in the enqueue (the job retries); they never shed online traffic.
    if (ctx->request->background) return Verdict::kContinue;
    ModelVersion& version = *ctx->handle.version;
    Status st = version.scheduler().Admission();
    if (st.ok()) return Verdict::kContinue;
    version.stats()->RecordFailure(FailureReason::kRejected, 0);
    ctx->sink.final(std::move(st));
    return Verdict::kTaken;
  }
};

}  // namespace

std::unique_ptr<RequestStage> MakeAdmissionStage() { return std::make_unique<AdmissionStage>(); }

}  // namespace inferd
