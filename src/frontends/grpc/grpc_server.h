// GrpcServer: the KServe v2 gRPC front end (inference.GRPCInferenceService,
// grpc.health.v1.Health and server reflection) over the InferenceServer facade.
//
// The services are built on gRPC's callback API: calls are reactors, not
// threads, so thousands of concurrent calls and streams cost memory, not
// threads. Inference is handed to InferenceServer::InferAsync and answered
// from the model worker that ran it; model code never runs on gRPC threads.
// On a plain port inferd's own HTTP/2 (h2_port.h) faces the clients: it
// serves ModelInfer itself and hands every other call to gRPC's server,
// which then listens on no port (GrpcServerOptions::own_http2). Repository load/unload
// (which block for a model load) run on one admin thread of this front end.
//
// This header is free of gRPC types: the CLI includes it without gRPC headers.
//
// Thread-safety: Start, StopAccepting and Stop are called from one thread.
// Ownership: the InferenceServer is not owned and must outlive this object.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/status.h"

namespace inferd {
namespace tracing {
class RequestObserver;
}
class InferenceServer;
}  // namespace inferd

namespace inferd::grpcfe {

// TLS on the gRPC port (docs/security.md): gRPC's own TLS (1.2 and 1.3).
// The files are re-read by gRPC itself every `refresh_secs` when they
// change (rotation without a restart; connections open keep theirs).
struct GrpcTlsOptions {
  std::string cert_file;  // the server's certificate chain; "" = plain
  std::string key_file;
  std::string client_ca_file;  // with `mutual`: clients must show a certificate these signed
  bool mutual = false;
  unsigned refresh_secs = 2;
  bool enabled() const { return !cert_file.empty(); }
};

struct GrpcServerOptions {
  std::string host = "0.0.0.0";
  uint16_t port = 8001;  // 0: any free port (see port())
  // Largest message received or sent; a bigger request is answered
  // RESOURCE_EXHAUSTED by gRPC before it reaches inferd.
  size_t max_message_bytes = 64u << 20;
  // Keepalive (gRPC channel arguments; defaults are Triton's).
  int keepalive_time_ms = 7200000;
  int keepalive_timeout_ms = 20000;
  bool keepalive_permit_without_calls = false;
  int http2_max_pings_without_data = 2;
  int http2_min_recv_ping_interval_without_data_ms = 300000;
  int http2_max_ping_strikes = 2;
  // ModelStreamInfer: a stream stops reading new requests while this many of
  // its requests are unanswered or unsent (HTTP/2 flow control then holds the
  // client back).
  size_t max_stream_in_flight = 1024;
  // HTTP/2 streams (calls) one connection may have open at once
  // (SETTINGS_MAX_CONCURRENT_STREAMS); a client opening more waits for one
  // to end. 0: gRPC's default (no limit).
  int max_concurrent_streams = 4096;
  // Who speaks HTTP/2 on a plain (non-TLS) port: inferd itself (h2_port.h:
  // ModelInfer served on `io_threads` I/O threads, the other methods handed
  // to gRPC's server in the process), or gRPC's server (false). With TLS the
  // port is always gRPC's server's.
  bool own_http2 = true;
  int io_threads = 1;
  // Tracing and the access log (docs/observability.md): ModelInfer calls and
  // stream requests are reported to it. Not owned; null: off.
  const tracing::RequestObserver* observer = nullptr;
  GrpcTlsOptions tls;
};

class GrpcServer {
 public:
  GrpcServer(GrpcServerOptions options, InferenceServer* server);
  ~GrpcServer();  // Stop(0) if still running
  GrpcServer(const GrpcServer&) = delete;
  GrpcServer& operator=(const GrpcServer&) = delete;

  // Binds and starts serving. UNAVAILABLE if the address cannot be bound.
  Status Start();
  uint16_t port() const;
  // Who speaks HTTP/2 on the port (after Start): "inferd's HTTP/2" or "gRPC's server".
  std::string transport() const;

  // Begins a graceful shutdown: health turns NOT_SERVING, new calls are
  // refused, open streams finish once their accepted requests are answered
  // and sent; calls still open after `grace` are cancelled. Returns at once.
  void StopAccepting(std::chrono::milliseconds grace);
  // Waits for the shutdown StopAccepting began (begins it if needed).
  void Stop(std::chrono::milliseconds grace);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace inferd::grpcfe
