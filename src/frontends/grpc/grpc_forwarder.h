// GrpcForwarder: the Forwarder for requests that came over gRPC (cluster
// mode). One channel per peer (HTTP/2: many calls share its connection), the
// generic stub (the request and answer bytes are passed on unparsed):
// - ModelInfer: one unary call; the answer's message is the relayed body.
// - a request that came on a ModelStreamInfer stream: a stream of its own to
//   the peer carrying that one request; each response the peer writes is one
//   relayed part (Events::body), as it comes.
//
// What counts as the peer failing (Events::done with an error before head):
// the call ended UNAVAILABLE before any response (no connection within
// connect_timeout, the connection dropped, or the peer refused: it is
// shutting down or cannot take more). Any other status is the peer's answer,
// relayed (RelayedAnswer's grpc-status/grpc-message headers). Over TLS, a
// failed handshake (the peer's certificate does not chain to the CA or name
// its host, or the peer refuses this node's) is UNAVAILABLE too.
//
// This header is free of gRPC types.
//
// Thread-safety: Forward may be called from any thread, not after Stop. Stop
// waits for the calls in flight (each bounded by answer_timeout).
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "server/forwarder.h"

namespace inferd::grpcfe {

struct GrpcForwarderOptions {
  std::chrono::milliseconds connect_timeout{1000};
  // The longest a forwarded call may take (its deadline; a long generation included).
  std::chrono::milliseconds answer_timeout{600000};
  size_t max_message_bytes = 64u << 20;  // largest answer accepted from a peer
  // TLS toward the peers' gRPC ports (enabled: every channel). gRPC re-reads
  // the files every `tls_refresh_secs` (a rotated certificate is taken up).
  PeerTlsFiles tls;
  unsigned tls_refresh_secs = 2;
};

class GrpcForwarder final : public Forwarder {
 public:
  explicit GrpcForwarder(GrpcForwarderOptions options = {});
  ~GrpcForwarder() override;
  GrpcForwarder(const GrpcForwarder&) = delete;
  GrpcForwarder& operator=(const GrpcForwarder&) = delete;

  void Forward(const std::string& address, std::shared_ptr<const WireRequest> request, const std::string& from_node,
               Events events) override;
  void Stop();

  struct Impl;  // the channels and the calls in flight (grpc_forwarder.cc)

 private:
  std::unique_ptr<Impl> impl_;
};

// The method paths a forwarded gRPC request names (WireRequest::target).
inline constexpr const char* kModelInferMethod = "/inference.GRPCInferenceService/ModelInfer";
inline constexpr const char* kModelStreamInferMethod = "/inference.GRPCInferenceService/ModelStreamInfer";
inline constexpr const char* kModelMetadataMethod = "/inference.GRPCInferenceService/ModelMetadata";
inline constexpr const char* kModelConfigMethod = "/inference.GRPCInferenceService/ModelConfig";
inline constexpr const char* kModelStatisticsMethod = "/inference.GRPCInferenceService/ModelStatistics";

}  // namespace inferd::grpcfe
