// ForwardToCopies: one request sent to the nodes that hold its model, in
// order, over the Forwarder, and the first answer relayed unchanged (a
// stream part by part) -- the forward stage's work for inference requests
// (server/pipeline/forward_stage.cc), and the facade's for the other requests
// about one model (metadata, config, statistics: InferenceServer::
// RouteModelRead). A peer that cannot be reached, drops the connection
// before answering, or refuses (503) is skipped (and, unless it only refused,
// marked down at once); after the last one `serve_here` gets the sink back.
//
// Thread-safety: call from any thread; the sink and `serve_here` run on the
// forwarder's threads (or the calling one when no target is left).
// Ownership: the pointers in ForwardParts are not owned and must outlive
// every call in flight.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/infer_request.h"
#include "server/cluster_service.h"

namespace inferd {

class Forwarder;

struct ForwardParts {
  ClusterService* cluster = nullptr;
  Forwarder* forwarder = nullptr;
  Clock* clock = nullptr;
};

// `wire` is the request as it came (never null); `model` names it in logs.
// `sink.partial` may be null (a stream's parts are then gathered into one
// answer). The answer arrives as InferResponse::relayed.
void ForwardToCopies(const ForwardParts& parts, std::string model, std::shared_ptr<const WireRequest> wire,
                     std::vector<ClusterService::Target> targets, ResponseSink sink,
                     std::function<void(ResponseSink)> serve_here);

}  // namespace inferd
