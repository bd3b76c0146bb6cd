// The OpenSSL context of an HTTP port with TLS (http_server.h, TlsFiles).
// Asio's SSL header is heavy: only the HTTP server includes this.
#pragma once

#include <boost/asio/ssl/context.hpp>
#include <memory>

#include "core/status.h"
#include "frontends/http/http_server.h"
#include "server/forwarder.h"

namespace inferd::http {

// A server context from `files`: TLS 1.2 and 1.3 only, forward-secret AEAD
// ciphers (ECDHE with AES-GCM or ChaCha20-Poly1305), no compression or
// renegotiation, the key checked against the certificate; with a client CA,
// a client must present a certificate it signed (mutual TLS). Errors name
// the file and OpenSSL's reason (INVALID_ARGUMENT).
Result<std::shared_ptr<boost::asio::ssl::context>> MakeServerTlsContext(const TlsFiles& files);

// A client context toward cluster peers (http_forwarder.cc): the same
// protocol versions and ciphers, peers' certificates checked against
// `files.ca_file` (or the system's CAs), this node's certificate and key
// shown when set. The peer's host name is checked per connection.
Result<std::shared_ptr<boost::asio::ssl::context>> MakePeerTlsContext(const PeerTlsFiles& files);

}  // namespace inferd::http
