// Tracing (docs/observability.md): a traced request's model span -- Triton's
// span named after the model, its triton.* attributes, REQUEST_START and
// REQUEST_END -- opened on the pinned version and ended with the answer; the
// request's later stages, queue and compute (and an ensemble's steps, a BLS
// call's models) are its children. In the pipeline only when tracing is on.
#include <charconv>

#include "server/pipeline/stages.h"

namespace inferd {
namespace {

class TraceStage final : public RequestStage {
 public:
  const char* name() const override { return "trace"; }
  Verdict Process(std::unique_ptr<RequestContext>& ctx, const RequestPipeline&) const override {
    InferRequest& request = *ctx->request;
    if (!request.trace) return Verdict::kContinue;
    const int64_t start = UnixNanos(ctx->arrival);
    auto span = std::make_shared<Span>(request.trace, request.model_name, SpanKind::kInternal, start);
    span->SetAttribute("triton.model_name", request.model_name);
    int64_t version = 0;
    const std::string& v = request.model_version;
    if (std::from_chars(v.data(), v.data() + v.size(), version).ec == std::errc()) {
      span->SetAttribute("triton.model_version", version);
    } else {
      span->SetAttribute("triton.model_version", v);
    }
    if (!request.id.empty()) span->SetAttribute("triton.request_id", request.id);
    span->AddEvent("REQUEST_START", start);
    request.trace = span->AsParent();
    ctx->sink.final = [span, final = std::move(ctx->sink.final)](Result<InferResponse>&& r) {
      const int64_t end = UnixNanosNow();
      const Status status = r.status();
      final(std::move(r));
      span->AddEvent("REQUEST_END", end);
      span->End(end, status);
    };
    return Verdict::kContinue;
  }
};

}  // namespace

std::unique_ptr<RequestStage> MakeTraceStage() { return std::make_unique<TraceStage>(); }

}  // namespace inferd
