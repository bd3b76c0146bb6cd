#include "server/forward_call.h"

#include <spdlog/spdlog.h>

#include "server/forwarder.h"

namespace inferd {
namespace {

// One forwarded request: tries the targets in order, then gives the sink to
// `serve_here`.
class ForwardCall : public std::enable_shared_from_this<ForwardCall> {
 public:
  ForwardCall(const ForwardParts& parts, std::string model, std::shared_ptr<const WireRequest> wire,
              std::vector<ClusterService::Target> targets, ResponseSink sink,
              std::function<void(ResponseSink)> serve_here)
      : parts_(parts),
        model_(std::move(model)),
        wire_(std::move(wire)),
        targets_(std::move(targets)),
        sink_(std::move(sink)),
        serve_here_(std::move(serve_here)) {}

  void Next() {
    ClusterService* cluster = parts_.cluster;
    if (next_ >= targets_.size()) {
      cluster->counters().forward_fallbacks.fetch_add(1, std::memory_order_relaxed);
      return serve_here_(std::move(sink_));
    }
    const ClusterService::Target& t = targets_[next_++];
    const bool grpc = wire_->protocol == WireRequest::Protocol::kGrpc;
    const std::string& address = grpc ? t.grpc_address : t.http_address;
    if (address.empty()) return Next();  // a peer without a gRPC API
    head_seen_ = false;
    refused_ = false;
    streaming_ = false;
    buffered_.reset();
    sent_ = parts_.clock->Now();
    cluster->counters().forwarded.fetch_add(1, std::memory_order_relaxed);
    auto self = shared_from_this();
    Forwarder::Events ev;
    ev.head = [self, id = t.id](int status, std::vector<std::pair<std::string, std::string>> headers, bool streamed) {
      self->OnHead(id, status, std::move(headers), streamed);
    };
    ev.body = [self](std::string piece) { return self->OnBody(std::move(piece)); };
    ev.done = [self, id = t.id](Status st) { self->OnDone(id, st); };
    parts_.forwarder->Forward(address, wire_, cluster->node_id(), std::move(ev));
  }

 private:
  void OnHead(const std::string& id, int status, std::vector<std::pair<std::string, std::string>> headers,
              bool streamed) {
    head_seen_ = true;
    parts_.cluster->counters().forward_ns.fetch_add(static_cast<uint64_t>((parts_.clock->Now() - sent_).count()),
                                                    std::memory_order_relaxed);
    // A peer that refuses (overloaded, shutting down): the next copy may take it.
    refused_ = status == 503 && next_ < targets_.size();
    if (refused_) return;
    headers.emplace_back(kServedByHeader, id);
    auto first = std::make_shared<RelayedAnswer>();
    first->status = status;
    first->headers = std::move(headers);
    streaming_ = streamed && sink_.partial != nullptr;
    if (streaming_) {
      InferResponse part;
      part.relayed = std::move(first);
      if (!sink_.partial(std::move(part))) stop_ = true;
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
    if (!sink_.partial(std::move(r))) stop_ = true;
    return !stop_;
  }

  void OnDone(const std::string& id, const Status& st) {
    if (!head_seen_ || refused_) {
      parts_.cluster->counters().forward_failures.fetch_add(1, std::memory_order_relaxed);
      if (!refused_) parts_.cluster->MarkDown(id);
      spdlog::debug("cluster: forward of '{}' to {} failed ({}); trying the next copy", model_, id,
                    refused_ ? "refused" : st.message());
      return Next();
    }
    if (!st.ok() && streaming_) {
      // The stream broke off after parts were relayed: the client learns it, as it would from the holder.
      return sink_.final(Status::Unavailable("node '" + id + "' dropped the stream: " + st.message()));
    }
    if (!st.ok()) return sink_.final(Status::Unavailable("node '" + id + "' broke off its answer: " + st.message()));
    InferResponse r;
    r.relayed = streaming_ ? std::make_shared<RelayedAnswer>() : std::move(buffered_);
    sink_.final(std::move(r));
  }

  const ForwardParts parts_;
  const std::string model_;
  const std::shared_ptr<const WireRequest> wire_;
  const std::vector<ClusterService::Target> targets_;
  ResponseSink sink_;
  std::function<void(ResponseSink)> serve_here_;
  size_t next_ = 0;
  TimePoint sent_{};
  // Touched by one forward's callbacks, which the forwarder runs in order.
  bool head_seen_ = false, refused_ = false, streaming_ = false, stop_ = false;
  std::shared_ptr<RelayedAnswer> buffered_;
};

}  // namespace

void ForwardToCopies(const ForwardParts& parts, std::string model, std::shared_ptr<const WireRequest> wire,
                     std::vector<ClusterService::Target> targets, ResponseSink sink,
                     std::function<void(ResponseSink)> serve_here) {
  auto call = std::make_shared<ForwardCall>(parts, std::move(model), std::move(wire), std::move(targets),
                                            std::move(sink), std::move(serve_here));
  call->Next();
}

}  // namespace inferd
