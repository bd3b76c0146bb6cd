// Forwarder: how a node sends a request to the peer that holds its model and
// gets the answer back, bytes unchanged (cluster mode; the forward stage,
// server/pipeline/forward_stage.cc, decides where). The HTTP implementation
// (frontends/http/http_forwarder.h) keeps a pool of connections per peer; the
// gRPC one (frontends/grpc/grpc_forwarder.h) a channel per peer.
//
// Thread-safety: implementations are thread-safe; Forward never blocks.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/infer_request.h"
#include "core/status.h"

namespace inferd {

// TLS toward peers (cluster mode): a node whose HTTP (gRPC) port speaks TLS
// forwards to its peers' HTTP (gRPC) ports over TLS -- a cluster's nodes
// share their TLS settings. The peer's certificate must chain to `ca_file`
// and name the host of the address it advertises; the node shows its own
// certificate to peers that ask (mutual TLS).
struct PeerTlsFiles {
  bool enabled = false;
  std::string ca_file;    // "" = the system's CA store
  std::string cert_file;  // this node's certificate chain and key ("" = none shown)
  std::string key_file;
};

class Forwarder {
 public:
  // What happens to one forwarded request, in order, on the forwarder's
  // threads (the callbacks must not block):
  // head (once, when the peer's status and headers arrived), body (zero or
  // more pieces: the whole body, or each piece of a streamed one as it
  // comes; false = stop reading), done (once, last). done with an error and
  // no head: the peer could not be reached or dropped the connection before
  // answering (the request may go to another peer); with a head: the answer
  // broke off.
  struct Events {
    std::function<void(int status, std::vector<std::pair<std::string, std::string>> headers, bool streamed)> head;
    std::function<bool(std::string piece)> body;
    std::function<void(Status)> done;
  };
  virtual ~Forwarder() = default;
  // Sends `request` to `address` (host:port) marked as forwarded by `from_node`.
  virtual void Forward(const std::string& address, std::shared_ptr<const WireRequest> request,
                       const std::string& from_node, Events events) = 0;
};

// Sends each request with the forwarder of its wire protocol (either may be
// null: such requests fail as if the peer could not be reached).
class ProtocolForwarder final : public Forwarder {
 public:
  ProtocolForwarder(Forwarder* http, Forwarder* grpc) : http_(http), grpc_(grpc) {}
  void Forward(const std::string& address, std::shared_ptr<const WireRequest> request, const std::string& from_node,
               Events events) override {
    Forwarder* f = request->protocol == WireRequest::Protocol::kGrpc ? grpc_ : http_;
    if (f == nullptr) return events.done(Status::Unavailable("no forwarder for this protocol"));
    f->Forward(address, std::move(request), from_node, std::move(events));
  }

 private:
  Forwarder* const http_;
  Forwarder* const grpc_;
};

// The header (gRPC: metadata key) a forwarded request carries: the node that
// forwarded it (its receiver serves it, whatever its own view says: a request
// bounces once at most).
inline constexpr const char* kForwardedByHeader = "Inferd-Forwarded-By";
// The header (gRPC: initial metadata of a unary call) a relayed answer gets:
// the node that served it.
inline constexpr const char* kServedByHeader = "Inferd-Served-By";

}  // namespace inferd
