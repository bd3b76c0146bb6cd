// H2Port: gRPC's wire protocol (HTTP/2, length-prefixed messages, status in
// trailers; ../shared/PROTOCOLS.md) served on libnghttp2 and Asio, without
// gRPC's own server. Each call is handed to an H2Handler chosen by its path;
// the transport knows nothing of inference.
//
// Why not gRPC's server: its completion-queue threads poll and hand every
// call from thread to thread; for a small request that cost twice the server
// CPU of the HTTP/1.1 port (docs/benchmarks.md, "One request's cost"). Here a
// connection lives on one I/O thread (an idle one spins briefly before it
// blocks, as the HTTP port's do), so a call costs one hand-off to the model
// worker and one back.
//
// What a client sees (gRPC's semantics): a message larger than
// max_message_bytes -> RESOURCE_EXHAUSTED; a compressed message (gzip,
// deflate) is decompressed, within the same limit; an unknown grpc-encoding
// -> UNIMPLEMENTED; a request that is not POST application/grpc* -> HTTP 415
// or 405; a reset stream or a closed connection cancels its calls (H2Handler::
// OnCancel); grpc-timeout passes -> H2Handler::OnDeadline. Metadata whose key
// ends in -bin is base64 on the wire and decoded here (and encoded back).
//
// Thread-safety: Start/StopAccepting/WaitForCalls/Stop from one controlling
// thread; H2Call's answering methods from any thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace inferd::grpcfe {

using MetadataList = std::vector<std::pair<std::string, std::string>>;

struct H2Connection;

// One call (an HTTP/2 stream). Its request side is set before the handler
// is made and never changes; the answering methods may be called from any
// thread, in this order: SendInitialMetadata (optional, once), SendMessage
// (any number), Finish (once; later calls are ignored). After the stream is
// gone (the client reset it, the connection closed) they do nothing.
// Ownership: shared by the port and the handler; whoever else holds a call
// must let it go before the port is destroyed (it refers to the port's I/O
// context and connection).
class H2Call : public std::enable_shared_from_this<H2Call> {
 public:
  H2Call(std::shared_ptr<H2Connection> connection, int32_t stream_id);
  ~H2Call();

  const std::string& path() const { return path_; }
  // Custom metadata as sent (reserved gRPC and HTTP/2 headers left out; -bin values decoded).
  const MetadataList& metadata() const { return metadata_; }
  std::string_view Metadata(std::string_view key) const;
  const std::string& peer() const { return peer_; }  // "127.0.0.1:5000", "[::1]:5000"
  // From grpc-timeout; time_point::max() when the client sent none.
  std::chrono::system_clock::time_point deadline() const { return deadline_; }

  void SendInitialMetadata(MetadataList md);
  // `message` serialized, without gRPC's 5-byte prefix (added here).
  void SendMessage(std::string message);
  // `code` is a grpc::StatusCode value.
  void Finish(int code, std::string message, MetadataList trailing = {});
  // A unary answer in one hand-off: its initial metadata, its message
  // (`framed`: with gRPC's prefix; "" for none) and its status.
  void Reply(MetadataList initial, std::string framed, int code, std::string message);
  // A handler that controls its flow (H2Handler::ManualFlowControl) says it
  // took `bytes` of the call's received messages: the client may send more.
  void Consumed(size_t bytes);

 private:
  friend struct H2Connection;
  struct Out;  // what the answer still has to send; on the connection's thread

  std::shared_ptr<H2Connection> connection_;
  const int32_t id_;
  std::string path_;
  std::string method_;
  std::string content_type_;
  std::string encoding_;  // grpc-encoding
  MetadataList metadata_;
  std::string peer_;
  std::chrono::system_clock::time_point deadline_ = std::chrono::system_clock::time_point::max();
  size_t header_bytes_ = 0;
  bool bad_header_ = false;
  std::unique_ptr<Out> out_;
};

// What a call's path is served by. Made on the connection's thread when the
// call's headers are in; its On* methods run on that thread, one at a time.
class H2Handler {
 public:
  virtual ~H2Handler() = default;
  // One whole message (prefix removed, decompressed).
  virtual void OnMessage(std::string message) = 0;
  // The client sent its last message.
  virtual void OnHalfClose() = 0;
  // The client reset the stream, or its connection closed, before Finish.
  virtual void OnCancel() = 0;
  // The call's grpc-timeout passed before Finish.
  virtual void OnDeadline() = 0;
  // True: the client's messages count against the stream's HTTP/2 window
  // until Consumed (a slow consumer holds a fast client back). False: they
  // are consumed as they arrive.
  virtual bool ManualFlowControl() const { return false; }
};

using H2Dispatch = std::function<std::shared_ptr<H2Handler>(const std::shared_ptr<H2Call>& call)>;

struct H2PortOptions {
  std::string host = "0.0.0.0";
  uint16_t port = 8001;  // 0: any free port
  int threads = 1;       // I/O threads
  size_t max_message_bytes = 64u << 20;
  int max_concurrent_streams = 4096;  // per connection; 0: no limit
  size_t max_header_bytes = 16u << 10;
  std::chrono::microseconds idle_spin{100};  // see HttpServerOptions::idle_spin
  // Keepalive, as gRPC's server does it (GrpcServerOptions; Triton's defaults):
  // every keepalive_time the port pings a connection (one with calls open,
  // or any with keepalive_permit_without_calls), at most
  // max_pings_without_data times between answers it sends (0: no cap), and
  // closes it when the ping is not answered within keepalive_timeout.
  std::chrono::milliseconds keepalive_time{7200000};
  std::chrono::milliseconds keepalive_timeout{20000};
  bool keepalive_permit_without_calls = false;
  int max_pings_without_data = 2;
  // A client's pings closer together than this (2 hours on a connection
  // without calls, unless keepalive_permit_without_calls) are strikes; past
  // max_ping_strikes the connection gets GOAWAY ENHANCE_YOUR_CALM
  // ("too_many_pings") and is closed. Strikes reset when the port sends an answer.
  std::chrono::milliseconds min_recv_ping_interval{300000};
  int max_ping_strikes = 2;
};

class H2Port {
 public:
  H2Port(H2PortOptions options, H2Dispatch dispatch);
  ~H2Port();  // Stop() if still running
  H2Port(const H2Port&) = delete;
  H2Port& operator=(const H2Port&) = delete;

  // Binds (UNAVAILABLE "cannot listen on HOST:PORT: why") and starts the I/O threads.
  Status Start();
  uint16_t port() const;
  // No new connections; open ones get a GOAWAY: their calls go on, new ones
  // are refused (the client sees UNAVAILABLE).
  void StopAccepting();
  // Waits until no call is open, at most until `deadline`. True when none is.
  bool WaitForCalls(std::chrono::steady_clock::time_point deadline);
  // Closes every connection (open calls are cancelled) and joins the threads.
  void Stop();
  // Connections closed for pinging too often, or for not answering a keepalive ping.
  uint64_t ping_strikeouts() const;
  uint64_t keepalive_timeouts() const;

  // For the fuzz target: `client_bytes`, fed `chunk` bytes at a time, as one
  // client connection's (the preface included) to a connection of this port
  // without a socket, on the calling thread; returns the first MiB the port
  // answered. Needs no Start; handlers' answers are run between chunks.
  std::string ServeBytes(std::string_view client_bytes, size_t chunk);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// gRPC's percent-encoding of grpc-message (bytes outside 0x20..0x7e, and '%').
std::string PercentEncode(std::string_view s);
// grpc-timeout ("100m", "5S", ...) -> its duration; false when malformed.
bool ParseGrpcTimeout(std::string_view v, std::chrono::nanoseconds* out);

}  // namespace inferd::grpcfe
