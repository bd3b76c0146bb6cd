// The last stage: the pinned version's scheduler. A reload or an eviction
// may have retired that version between the routing and the enqueue; the
// request then goes to what serves now, once, instead of failing (swaps lose
// no requests), or waits for the model to load again (on demand).
#include "server/pipeline/stages.h"
#include "server/request_validation.h"

namespace inferd {
namespace {

class EnqueueStage final : public RequestStage {
 public:
  explicit EnqueueStage(Rerouter rerouter) : rerouter_(std::move(rerouter)) {}
  const char* name() const override { return "enqueue"; }

  Verdict Process(std::unique_ptr<RequestContext>& ctx, const RequestPipeline&) const override {
    ModelVersion& version = *ctx->handle.version;
    auto pending = std::make_unique<PendingRequest>();
    pending->request = std::move(ctx->request);
    pending->callback = std::move(ctx->sink.final);
    pending->partial = std::move(ctx->sink.partial);
    pending->rows = ctx->rows;
    pending->arrival = ctx->arrival;
    Status st = version.scheduler().Enqueue(pending);
    if (st.code() == StatusCode::kUnavailable && !rerouter_.shutting_down->load()) {
      st = Reroute(*ctx, version, pending, st);
      if (!pending) return Verdict::kTaken;  // waits for its model's load
    }
    if (!st.ok()) {
      version.stats()->RecordFailure(FailureReason::kRejected, 0);
      pending->callback(st);
    }
    return Verdict::kTaken;
  }

 private:
  // The enqueue on `retired`'s successor; moves `pending` out when it waits for a load.
  Status Reroute(const RequestContext& ctx, const ModelVersion& retired, std::unique_ptr<PendingRequest>& pending,
                 Status st) const {
    InferRequest& request = *pending->request;
    auto now = rerouter_.find(request, ctx.asked_default);
    if (!now.ok() && ctx.may_wait && rerouter_.can_wait(now.status())) {
      if (ctx.asked_default) request.model_version.clear();
      rerouter_.wait_for_load(std::move(pending->request),
                              ResponseSink{std::move(pending->partial), std::move(pending->callback)}, ctx.arrival);
      pending.reset();
      return Status::OK();
    }
    if (!now.ok() || now->get() == &retired) return st;
    Result<int64_t> again = ValidateAndNormalize((*now)->spec(), &request);
    if (!again.ok()) return st;
    pending->rows = *again;
    request.model_version = (*now)->version_string();
    return (*now)->scheduler().Enqueue(pending);
  }

  const Rerouter rerouter_;
};

}  // namespace

std::unique_ptr<RequestStage> MakeEnqueueStage(Rerouter rerouter) {
  return std::make_unique<EnqueueStage>(std::move(rerouter));
}

}  // namespace inferd
