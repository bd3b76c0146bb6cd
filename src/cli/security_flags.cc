#include "cli/security_flags.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>

#include "auth/pem_files.h"

namespace inferd::cli {

void AddSecurityFlags(CLI::App* cmd, SecurityFlags* flags) {
  cmd->add_option("--admin-token-file", flags->admin_token_file,
                  "File holding a bearer token with every scope; alone, it protects the management routes "
                  "(repository, labels, rollouts, jobs, cluster): Authorization: Bearer <token> (HTTP) or "
                  "authorization metadata (gRPC); 401 / UNAUTHENTICATED without it")
      ->check(CLI::ExistingFile);
  cmd->add_option("--admin-token-env", flags->admin_token_env,
                  "Name of an environment variable holding that token (instead of a file; never the token "
                  "itself on the command line)");
  cmd->add_option("--auth-tokens-file", flags->auth_tokens_file,
                  "JSON file of bearer tokens with scopes (infer, read, models, jobs, cluster), optional model "
                  "restrictions and request rates (docs/security.md); every route but health then needs a token "
                  "with its scope (403 / PERMISSION_DENIED without). Re-read on SIGHUP and when it changes")
      ->check(CLI::ExistingFile);
  cmd->add_option("--auth-all-routes", flags->auth_all_routes,
                  "Require a token on every API route (inference, metadata, health too), not only those its "
                  "scopes name")
      ->capture_default_str();
  cmd->add_option("--tls-cert-file", flags->tls_cert_file,
                  "PEM certificate chain: HTTP, gRPC and metrics ports speak TLS (1.2 and 1.3 only); re-read when it "
                  "changes and on SIGHUP")
      ->check(CLI::ExistingFile);
  cmd->add_option("--tls-key-file", flags->tls_key_file, "PEM private key of --tls-cert-file")
      ->check(CLI::ExistingFile);
  cmd->add_option("--tls-client-ca-file", flags->tls_client_ca_file,
                  "PEM CA bundle: mutual TLS, every client must present a certificate these signed")
      ->check(CLI::ExistingFile);
  cmd->add_option("--tls-handshake-timeout-ms", flags->tls_handshake_timeout_ms,
                  "An HTTP client must finish its TLS handshake within this, else it is disconnected")
      ->capture_default_str()
      ->check(CLI::Range(100, 600000));
  cmd->add_option("--grpc-use-ssl", flags->grpc_use_ssl,
                  "Triton's: TLS on the gRPC port with --grpc-server-cert and --grpc-server-key (default: the "
                  "--tls-* files)")
      ->capture_default_str();
  cmd->add_option("--grpc-server-cert", flags->grpc_server_cert, "Triton's: the gRPC port's PEM certificate chain")
      ->check(CLI::ExistingFile);
  cmd->add_option("--grpc-server-key", flags->grpc_server_key, "Triton's: the gRPC port's PEM private key")
      ->check(CLI::ExistingFile);
  cmd->add_option("--grpc-root-cert", flags->grpc_root_cert,
                  "Triton's: PEM CA bundle that client certificates are checked against (with --grpc-use-ssl-mutual)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--grpc-use-ssl-mutual", flags->grpc_use_ssl_mutual,
                  "Triton's: mutual TLS on the gRPC port (clients need a certificate --grpc-root-cert signed)")
      ->capture_default_str();
  cmd->add_option("--cluster-tls-ca-file", flags->cluster_tls_ca_file,
                  "Cluster mode with TLS: PEM CA bundle that peers' certificates are checked against when this node "
                  "forwards to them (default: --tls-client-ca-file, else the system's CAs); re-read when it changes")
      ->check(CLI::ExistingFile);
  cmd->add_option("--credentials-check-interval-ms", flags->reload_check_ms,
                  "How often the tokens file (and TLS files) are checked for changes; a changed one is re-read "
                  "(so is every one on SIGHUP)")
      ->capture_default_str()
      ->check(CLI::Range(50, 3600000));
}

Result<std::shared_ptr<auth::AccessPolicy>> BuildAccessPolicy(const SecurityFlags& flags, Clock* clock) {
  auto token = auth::ReadToken(flags.admin_token_file, flags.admin_token_env,
                               flags.admin_token_env.empty() ? nullptr : std::getenv(flags.admin_token_env.c_str()));
  if (!token.ok()) return token.status();
  if (token->empty() && flags.auth_tokens_file.empty()) {
    if (flags.auth_all_routes) {
      return Status::InvalidArgument(
          "--auth-all-routes needs tokens (--admin-token-file, --admin-token-env or --auth-tokens-file)");
    }
    return std::shared_ptr<auth::AccessPolicy>();
  }
  auth::AccessOptions o;
  o.admin_token = std::move(*token);
  o.tokens_file = flags.auth_tokens_file;
  o.all_routes = flags.auth_all_routes;
  auto policy = auth::AccessPolicy::Create(std::move(o), clock);
  if (!policy.ok()) return policy.status();
  const bool file = !flags.auth_tokens_file.empty();
  spdlog::info("bearer tokens required for {}{}",
               flags.auth_all_routes ? "every API route"
               : file                ? "every API route but health"
                                     : "management routes",
               file ? " (tokens file " + flags.auth_tokens_file + ")" : std::string());
  return std::shared_ptr<auth::AccessPolicy>(std::move(*policy));
}

Result<TlsSetup> TlsFromFlags(const SecurityFlags& f) {
  TlsSetup t;
  if (f.tls_cert_file.empty() != f.tls_key_file.empty()) {
    return Status::InvalidArgument("--tls-cert-file and --tls-key-file go together");
  }
  if (!f.tls_client_ca_file.empty() && f.tls_cert_file.empty()) {
    return Status::InvalidArgument("--tls-client-ca-file needs --tls-cert-file and --tls-key-file");
  }
  t.http = {f.tls_cert_file, f.tls_key_file, f.tls_client_ca_file};
  // gRPC: Triton's flags where given, else the same files as HTTP.
  const bool grpc_tls = f.grpc_use_ssl || f.grpc_use_ssl_mutual || !f.tls_cert_file.empty();
  if (grpc_tls) {
    t.grpc.cert_file = f.grpc_server_cert.empty() ? f.tls_cert_file : f.grpc_server_cert;
    t.grpc.key_file = f.grpc_server_key.empty() ? f.tls_key_file : f.grpc_server_key;
    t.grpc.client_ca_file = f.grpc_root_cert.empty() ? f.tls_client_ca_file : f.grpc_root_cert;
    t.grpc.mutual = f.grpc_use_ssl_mutual || (f.grpc_root_cert.empty() && !f.tls_client_ca_file.empty());
    t.grpc.refresh_secs = static_cast<unsigned>(std::max(1, (f.reload_check_ms + 999) / 1000));
    if (t.grpc.cert_file.empty() || t.grpc.key_file.empty()) {
      return Status::InvalidArgument(
          "TLS on gRPC needs a certificate and a key (--grpc-server-cert and --grpc-server-key, or --tls-cert-file "
          "and --tls-key-file)");
    }
    if (t.grpc.mutual && t.grpc.client_ca_file.empty()) {
      return Status::InvalidArgument("--grpc-use-ssl-mutual needs --grpc-root-cert (or --tls-client-ca-file)");
    }
  }
  // The files checked now: a bad one stops the start before any model loads.
  if (t.http.enabled()) {
    if (Status st = auth::CheckCertificateAndKey(t.http.cert_file, t.http.key_file); !st.ok()) return st;
    if (!t.http.client_ca_file.empty()) {
      if (Status st = auth::CheckCaFile(t.http.client_ca_file); !st.ok()) return st;
    }
  }
  if (t.grpc.enabled()) {
    if (Status st = auth::CheckCertificateAndKey(t.grpc.cert_file, t.grpc.key_file); !st.ok()) return st;
    if (t.grpc.mutual) {
      if (Status st = auth::CheckCaFile(t.grpc.client_ca_file); !st.ok()) return st;
    }
  }
  if (!f.cluster_tls_ca_file.empty()) {
    if (Status st = auth::CheckCaFile(f.cluster_tls_ca_file); !st.ok()) return st;
  }
  auto peers = [&f](const std::string& cert, const std::string& key, const std::string& client_ca) {
    return PeerTlsFiles{true, f.cluster_tls_ca_file.empty() ? client_ca : f.cluster_tls_ca_file, cert, key};
  };
  if (t.http.enabled()) t.http_peers = peers(t.http.cert_file, t.http.key_file, t.http.client_ca_file);
  if (t.grpc.enabled()) t.grpc_peers = peers(t.grpc.cert_file, t.grpc.key_file, t.grpc.client_ca_file);
  if (t.http.enabled()) {
    spdlog::info("TLS on the HTTP and metrics ports ({}){}", f.tls_cert_file,
                 f.tls_client_ca_file.empty() ? "" : ", mutual: client certificates signed by " + f.tls_client_ca_file);
  }
  if (t.grpc.enabled()) {
    spdlog::info("TLS on the gRPC port ({}){}", t.grpc.cert_file,
                 t.grpc.mutual ? ", mutual: client certificates signed by " + t.grpc.client_ca_file : "");
  }
  return t;
}

}  // namespace inferd::cli
