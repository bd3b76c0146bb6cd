// The forward stage (cluster mode), first in the routing pipeline, before the
// request is resolved to a version of a local model: a request for a model
// this node does not hold goes to a peer that holds it, over the Forwarder,
// and the peer's answer is relayed unchanged (streams part by part). A peer
// that cannot be reached, drops the connection before answering, or refuses
// (503) is skipped (and, unless it only refused, marked down at once); after
// the last peer the request is served here (loading the model if need be).
// Retryable conditions are never answered 500. A request another node
// forwarded here is never forwarded again.
#include <spdlog/spdlog.h>

#include "server/cluster_service.h"
#include "server/forwarder.h"
#include "server/pipeline/stages.h"

namespace inferd {
namespace {

// One forwarded request: tries the targets in order, then hands the request
// back to the pipeline (served here).
class ForwardCall : public std::enable_shared_from_this<ForwardCall> {
 public:
  ForwardCall(std::unique_ptr<RequestContext> ctx, std::vector<ClusterService::Target> targets, ClusterService* cluster,
              Forwarder* forwarder, const RequestPipeline* pipeline, Clock* clock)
      : ctx_(std::move(ctx)),
        targets_(std::move(targets)),
        cluster_(cluster),
        forwarder_(forwarder),
        pipeline_(pipeline),
        clock_(clock) {}

  void Next() {
    if (next_ >= targets_.size()) {
      cluster_->counters().forward_fallbacks.fetch_add(1, std::memory_order_relaxed);
      return pipeline_->Continue(std::move(ctx_));  // served here
    }
    const ClusterService::Target& t = targets_[next_++];
    const bool grpc = ctx_->request->wire->protocol == WireRequest::Protocol::kGrpc;
    const std::string& address = grpc ? t.grpc_address : t.http_address;
    if (address.empty()) return Next();  // a peer without a gRPC API
    head_seen_ = false;
    refused_ = false;
    streaming_ = false;
    buffered_.reset();
    sent_ = clock_->Now();
    cluster_->counters().forwarded.fetch_add(1, std::memory_order_relaxed);
    auto self = shared_from_this();
    Forwarder::Events ev;
    ev.head = [self, id = t.id](int status, std::vector<std::pair<std::string, std::string>> headers, bool streamed) {
      self->OnHead(id, status, std::move(headers), streamed);
    };
    ev.body = [self](std::string piece) { return self->OnBody(std::move(piece)); };
    ev.done = [self, id = t.id](Status st) { self->OnDone(id, st); };
    forwarder_->Forward(address, ctx_->request->wire, cluster_->node_id(), std::move(ev));
  }

 private:
  void OnHead(const std::string& id, int status, std::vector<std::pair<std::string, std::string>> headers,
              bool streamed) {
    head_seen_ = true;
    cluster_->counters().forward_ns.fetch_add(static_cast<uint64_t>((clock_->Now() - sent_).count()),
                                              std::memory_order_relaxed);
    // A peer that refuses (overloaded, shutting down): the next copy may take it.
    refused_ = status == 503 && next_ < targets_.size();
    if (refused_) return;
    headers.emplace_back(kServedByHeader, id);
    auto first = std::make_shared<RelayedAnswer>();
    first->status = status;
    first->headers = std::move(headers);
    streaming_ = streamed && ctx_->sink.partial != nullptr;
    if (streaming_) {
      InferResponse part;
      part.relayed = std::move(first);
      if (!ctx_->sink.partial(std::move(part))) stop_ = true;
    } else {
      buffered_ = std::move(first);
    }
  }

  bool OnBody(std::string piece) {
    if (refused_) return true;  // a refusal's body is read and dropped (the connection stays usable)
    if (stop_) return false;
    if (!streaming_) {
      buffered_->body += piece;
      return true;
    }
    auto part = std::make_shared<RelayedAnswer>();
    part->body = std::move(piece);
    InferResponse r;
    r.relayed = std::move(part);
    if (!ctx_->sink.partial(std::move(r))) stop_ = true;
    return !stop_;
  }

  void OnDone(const std::string& id, const Status& st) {
    if (!head_seen_ || refused_) {
      cluster_->counters().forward_failures.fetch_add(1, std::memory_order_relaxed);
      if (!refused_) cluster_->MarkDown(id);
      spdlog::debug("cluster: forward of '{}' to {} failed ({}); trying the next copy", ctx_->request->model_name, id,
                    refused_ ? "refused" : st.message());
      return Next();
    }
    if (!st.ok() && streaming_) {
      // The stream broke off after parts were relayed: the client learns it, as it would from the holder.
      return ctx_->sink.final(Status::Unavailable("node '" + id + "' dropped the stream: " + st.message()));
    }
    if (!st.ok())
      return ctx_->sink.final(Status::Unavailable("node '" + id + "' broke off its answer: " + st.message()));
    InferResponse r;
    r.relayed = streaming_ ? std::make_shared<RelayedAnswer>() : std::move(buffered_);
    ctx_->sink.final(std::move(r));
  }

  std::unique_ptr<RequestContext> ctx_;
  const std::vector<ClusterService::Target> targets_;
  ClusterService* const cluster_;
  Forwarder* const forwarder_;
  const RequestPipeline* const pipeline_;
  Clock* const clock_;
  size_t next_ = 0;
  TimePoint sent_{};
  // Touched by one forward's callbacks, which the forwarder runs in order.
  bool head_seen_ = false, refused_ = false, streaming_ = false, stop_ = false;
  std::shared_ptr<RelayedAnswer> buffered_;
};

class ForwardStage final : public RequestStage {
 public:
  ForwardStage(ClusterService* cluster, Forwarder* forwarder, Clock* clock)
      : cluster_(cluster), forwarder_(forwarder), clock_(clock) {}
  const char* name() const override { return "forward"; }

  Verdict Process(std::unique_ptr<RequestContext>& ctx, const RequestPipeline& pipeline) const override {
    const InferRequest& r = *ctx->request;
    if (!r.wire || !r.forwarded_by.empty()) return Verdict::kContinue;
    ClusterService::Route route = cluster_->RouteModel(r.model_name);
    if (route.local) return Verdict::kContinue;
    auto call = std::make_shared<ForwardCall>(std::move(ctx), std::move(route.targets), cluster_, forwarder_, &pipeline,
                                              clock_);
    call->Next();
    return Verdict::kTaken;
  }

 private:
  ClusterService* const cluster_;
  Forwarder* const forwarder_;
  Clock* const clock_;
};

}  // namespace

std::unique_ptr<RequestStage> MakeForwardStage(ClusterService* cluster, Forwarder* forwarder, Clock* clock) {
  return std::make_unique<ForwardStage>(cluster, forwarder, clock);
}

}  // namespace inferd
