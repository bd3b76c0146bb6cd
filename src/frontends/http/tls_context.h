// The OpenSSL context of an HTTP port with TLS (http_server.h, TlsFiles).
// Asio's SSL header is heavy: only the HTTP server includes this.
#pragma once

#include <boost/asio/ssl/context.hpp>
#include <memory>

#include "core/status.h"
#include "frontends/http/http_server.h"

namespace inferd::http {

// A server context from `files`: TLS 1.2 and 1.3 only, forward-secret AEAD
// ciphers (ECDHE with AES-GCM or ChaCha20-Poly1305), no compression or
// renegotiation, the key checked against the certificate; with a client CA,
// a client must present a certificate it signed (mutual TLS). Errors name
// the file and OpenSSL's reason (INVALID_ARGUMENT).
Result<std::shared_ptr<boost::asio::ssl::context>> MakeServerTlsContext(const TlsFiles& files);

}  // namespace inferd::http
