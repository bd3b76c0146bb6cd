// The forward stage (cluster mode), first in the routing pipeline, before the
// request is resolved to a version of a local model: a request for a model
// this node does not hold goes to a peer that holds it (server/forward_call.h:
// the copies in order, the answer relayed unchanged, streams part by part);
// after the last peer the request is served here (loading the model if need
// be). Retryable conditions are never answered 500. A request another node
// forwarded here is never forwarded again.
#include "server/forward_call.h"
#include "server/pipeline/stages.h"
#include "tracing/trace_context.h"

namespace inferd {
namespace {

// A traced request's wire form with the forward span as the peer's parent (W3C traceparent, HTTP header or gRPC
// metadata alike: the peer continues this trace).
std::shared_ptr<const WireRequest> WithTraceparent(const WireRequest& wire, const Span& span) {
  auto copy = std::make_shared<WireRequest>(wire);
  std::erase_if(copy->headers, [](const auto& h) { return h.first == "traceparent"; });
  copy->headers.emplace_back("traceparent", tracing::FormatTraceparent(span.trace_id(), span.id(), true));
  return copy;
}

class ForwardStage final : public RequestStage {
 public:
  ForwardStage(ClusterService* cluster, Forwarder* forwarder, Clock* clock) : parts_{cluster, forwarder, clock} {}
  const char* name() const override { return "forward"; }

  Verdict Process(std::unique_ptr<RequestContext>& ctx, const RequestPipeline& pipeline) const override {
    const InferRequest& r = *ctx->request;
    if (!r.wire || !r.forwarded_by.empty()) return Verdict::kContinue;
    ClusterService::Route route = parts_.cluster->RouteModel(r.model_name);
    if (route.local) return Verdict::kContinue;
    std::string model = r.model_name;
    std::shared_ptr<const WireRequest> wire = r.wire;
    ResponseSink sink = std::move(ctx->sink);
    // Traced: a "forward" span (kind CLIENT) from here to the answer relayed, the peer's spans under it.
    std::shared_ptr<Span> span;
    if (r.trace) {
      span = std::make_shared<Span>(r.trace, "forward", SpanKind::kClient, UnixNanosNow());
      span->SetAttribute("triton.model_name", model);
      wire = WithTraceparent(*wire, *span);
      sink.final = [span, final = std::move(sink.final)](Result<InferResponse> answer) {
        span->End(UnixNanosNow(), answer.status());
        final(std::move(answer));
      };
    }
    // The request waits here, without its sink, until no copy took it.
    auto held = std::make_shared<std::unique_ptr<RequestContext>>(std::move(ctx));
    ForwardToCopies(parts_, std::move(model), std::move(wire), std::move(route.targets), std::move(sink),
                    [held, &pipeline, span](ResponseSink back) {
                      if (span) {  // no copy took it: served here
                        span->SetAttribute("inferd.served_here", true);
                        span->End(UnixNanosNow());
                        // `back.final` is the wrapper above; the span ended, so it only answers.
                      }
                      (*held)->sink = std::move(back);
                      pipeline.Continue(std::move(*held));  // served here
                    });
    return Verdict::kTaken;
  }

 private:
  const ForwardParts parts_;
};

}  // namespace

std::unique_ptr<RequestStage> MakeForwardStage(ClusterService* cluster, Forwarder* forwarder, Clock* clock) {
  return std::make_unique<ForwardStage>(cluster, forwarder, clock);
}

}  // namespace inferd
