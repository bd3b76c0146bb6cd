// `serve`'s security flags (docs/security.md): tokens (--admin-token-file,
// --admin-token-env, --auth-tokens-file, --auth-all-routes) and TLS
// (--tls-cert-file, --tls-key-file, --tls-client-ca-file; Triton's
// --grpc-use-ssl, --grpc-server-cert, --grpc-server-key, --grpc-root-cert,
// --grpc-use-ssl-mutual), --cluster-tls-ca-file, --credentials-check-interval-ms.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "auth/access_policy.h"
#include "core/clock.h"
#include "core/status.h"
#include "frontends/grpc/grpc_server.h"
#include "frontends/http/http_server.h"
#include "server/forwarder.h"

namespace inferd::cli {

struct SecurityFlags {
  std::string admin_token_file, admin_token_env;
  std::string auth_tokens_file;
  bool auth_all_routes = false;
  int reload_check_ms = 2000;  // how often credential files are checked for changes
  std::string tls_cert_file, tls_key_file, tls_client_ca_file;
  int tls_handshake_timeout_ms = 10000;
  // Triton's gRPC names.
  bool grpc_use_ssl = false, grpc_use_ssl_mutual = false;
  std::string grpc_server_cert, grpc_server_key, grpc_root_cert;
  std::string cluster_tls_ca_file;  // what peers' certificates are checked against (cluster mode)
};

// TLS on each port, from the flags (both empty: plain).
struct TlsSetup {
  http::TlsFiles http;  // the HTTP and metrics ports
  grpcfe::GrpcTlsOptions grpc;
  // Toward peers (cluster mode): TLS where this node's port has it, peers'
  // certificates checked against --cluster-tls-ca-file, else the port's
  // client CA, else the system's CAs; this node's certificate shown.
  PeerTlsFiles http_peers, grpc_peers;
};
// INVALID_ARGUMENT for an incomplete pair (a certificate without its key, a
// client CA without a certificate, mutual TLS without a CA); logs what is on.
Result<TlsSetup> TlsFromFlags(const SecurityFlags& flags);

void AddSecurityFlags(CLI::App* cmd, SecurityFlags* flags);
// The access policy the flags describe (null when no token is configured;
// INVALID_ARGUMENT for an unreadable token or tokens file, or
// --auth-all-routes without tokens); logs what is protected.
Result<std::shared_ptr<auth::AccessPolicy>> BuildAccessPolicy(const SecurityFlags& flags, Clock* clock);

}  // namespace inferd::cli
