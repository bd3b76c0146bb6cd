// HttpServer: an HTTP/1.1 server (Boost.Beast) with keep-alive, many
// concurrent connections on a few threads, request limits and timeouts, and
// transparent gzip/deflate of request and response bodies.
//
// Requests are handed to a Handler; its Responder may be called from any
// thread (a model worker), and the response is written on the connection's
// own strand. Handlers never run model code themselves (see InferenceServer).
//
// Limits and what a client sees when it breaks one:
//   body larger than max_body_bytes (also after decompression) -> 413, close
//   headers larger than max_header_bytes                        -> 431, close
//   unparseable HTTP                                             -> 400, close
//   no complete header within idle_timeout                       -> close
//   body not complete within read_timeout after its header       -> close
//   max_connections already open                                -> a new one is closed at once
//   max_connections_per_client open from the client's address   -> its new one is closed at once
//
// A client that closes its connection while its request is being handled
// cancels the request (Request::cancellation): every cancel_check, the
// connections whose request has been in flight at least that long are peeked
// (one non-blocking recv each); the end of the stream or a reset raises the
// flag. Fast requests are never peeked, so this costs nothing per request.
//
// Thread-safety: Start/StopAccepting/Stop from one controlling thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/status.h"
#include "frontends/http/http_types.h"

namespace inferd::http {

// TLS from PEM files (docs/security.md). No certificate: plain HTTP.
struct TlsFiles {
  std::string cert_file;       // the server's certificate chain
  std::string key_file;        // its private key
  std::string client_ca_file;  // "" = no client certificates; else mutual TLS: a client must show one signed by these
  bool enabled() const { return !cert_file.empty(); }
};

struct HttpServerOptions {
  std::string host = "0.0.0.0";
  uint16_t port = 8000;  // 0 = pick a free port (see port())
  int threads = 1;       // I/O threads; model code never runs on them
  size_t max_body_bytes = 64u << 20;
  size_t max_header_bytes = 16u << 10;
  std::chrono::milliseconds idle_timeout{60000};   // waiting for / reading a request header
  std::chrono::milliseconds read_timeout{30000};   // reading a request body
  std::chrono::milliseconds write_timeout{30000};  // writing a response
  bool compress_responses = true;                  // honour Accept-Encoding: gzip/deflate
  // An idle I/O thread polls for ready handlers this long before it blocks in
  // epoll: a response completed by a model worker right after is then written
  // without a cross-thread wake-up. 0 = block at once.
  std::chrono::microseconds idle_spin{100};
  // How often connections with a request in flight are checked for a client
  // that hung up (see above). 0 = never.
  std::chrono::milliseconds cancel_check{100};
  // Called (on an I/O thread; must not block) when a client is found gone
  // while its request is being handled, after its cancellation is raised.
  std::function<void()> on_client_gone;
  // Fill Request::client with the peer's address (the access log wants it).
  bool client_address = false;
  // Connections open at once on this port; more are closed as they come.
  size_t max_connections = 10000;
  // Connections one client address may hold open on this port; more of its are closed as they come, others'
  // are served (0 = no cap; behind a load balancer or proxy every client has its address).
  size_t max_connections_per_client = 0;
  // TLS on this port (TLS 1.2 and 1.3 only; ECDHE key exchange with AES-GCM or ChaCha20-Poly1305).
  TlsFiles tls;
  // A TLS client must finish its handshake within this (else: closed).
  std::chrono::milliseconds handshake_timeout{10000};
};

class HttpServer {
 public:
  HttpServer(HttpServerOptions options, Handler handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds, listens and starts the I/O threads.
  Status Start();
  // The bound port (after Start).
  uint16_t port() const;
  // TLS: re-reads the certificate, key and client CA files; connections
  // opened from now on use them, open ones keep theirs. On an error (a
  // file unreadable, a key that does not match the certificate) the ones in
  // use stay. Thread-safe.
  Status ReloadTls();
  // Stops accepting new connections; existing ones keep being served.
  void StopAccepting();
  // Waits up to `grace` for requests being handled to be answered, then
  // closes all connections and joins the threads. Idempotent.
  void Stop(std::chrono::milliseconds grace);

  struct Impl;  // implementation detail (http_server.cc)

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace inferd::http
