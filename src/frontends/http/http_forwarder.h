// HttpForwarder: the Forwarder over HTTP/1.1 (Boost.Beast, in
// http_forwarder.cc only): one I/O thread, keep-alive connections pooled per
// peer, the peer's answer read as it comes (a streamed one piece by piece).
// With TLS set (SetTls), every connection made from then on speaks TLS.
//
// What counts as the peer failing (Events::done with an error before head):
// no connection within connect_timeout, the connection refused or dropped
// before the answer's status line, a failed TLS handshake (a certificate
// that does not chain to the CA or does not name the peer's host, or the
// peer refusing this node's certificate). A pooled connection the peer had closed
// meanwhile is not a failure: the request is sent once more on a new one.
//
// Thread-safety: Forward and SetTls may be called from any thread, not after
// Stop. Stop lets the calls in flight finish, then joins the I/O thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "core/status.h"
#include "server/forwarder.h"

namespace inferd::http {

struct HttpForwarderOptions {
  std::chrono::milliseconds connect_timeout{1000};
  // The longest a forwarded request may take (a long generation included).
  std::chrono::milliseconds answer_timeout{600000};
  size_t max_idle_per_peer = 64;  // idle keep-alive connections kept per peer
};

class HttpForwarder final : public Forwarder {
 public:
  explicit HttpForwarder(HttpForwarderOptions options = {});
  ~HttpForwarder() override;
  HttpForwarder(const HttpForwarder&) = delete;
  HttpForwarder& operator=(const HttpForwarder&) = delete;

  void Forward(const std::string& address, std::shared_ptr<const WireRequest> request, const std::string& from_node,
               Events events) override;
  // Connections made from now on speak TLS with `files` (frontends/http/
  // tls_context.h, MakePeerTlsContext); pooled ones stay as they are. Also
  // how a rotated certificate is taken up. INVALID_ARGUMENT naming the file
  // when one is bad: the TLS in use (or none) is kept.
  Status SetTls(const PeerTlsFiles& files);
  void Stop();

  struct Impl;  // the I/O thread and the pool (http_forwarder.cc)

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace inferd::http
