#include "frontends/http/tls_context.h"

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <string>

#include "auth/pem_files.h"

namespace inferd::http {
namespace {

namespace ssl = boost::asio::ssl;

// TLS 1.2's suites (1.3's are fixed by OpenSSL and all forward-secret AEAD).
constexpr const char* kTls12Ciphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"
    "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

std::string Why(const boost::system::error_code& ec) {
  std::string m = ec.message();
  // Asio's message for OpenSSL errors can be terse; OpenSSL's own queue says more.
  if (unsigned long e = ERR_get_error(); e != 0) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    m = buf;
  }
  ERR_clear_error();
  return m;
}

// TLS 1.2 and 1.3 only, inferd's 1.2 suites, no compression or renegotiation.
Status Harden(ssl::context& ctx) {
  SSL_CTX* native = ctx.native_handle();
  ctx.set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                  ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 | ssl::context::no_compression |
                  ssl::context::single_dh_use);
  SSL_CTX_set_min_proto_version(native, TLS1_2_VERSION);
  SSL_CTX_set_options(native, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  if (SSL_CTX_set_cipher_list(native, kTls12Ciphers) != 1) {
    return Status::Internal("OpenSSL refused inferd's TLS 1.2 cipher list");
  }
  return Status::OK();
}

// The certificate chain and key this side shows (both files already checked as a pair).
Status UseIdentity(ssl::context& ctx, const std::string& cert_file, const std::string& key_file) {
  boost::system::error_code ec;
  ctx.use_certificate_chain_file(cert_file, ec);
  if (ec) return Status::InvalidArgument("TLS certificate " + cert_file + ": " + Why(ec));
  ctx.use_private_key_file(key_file, ssl::context::pem, ec);
  if (ec) return Status::InvalidArgument("TLS key " + key_file + ": " + Why(ec));
  return Status::OK();
}

}  // namespace

Result<std::shared_ptr<ssl::context>> MakePeerTlsContext(const PeerTlsFiles& files) {
  if (files.cert_file.empty() != files.key_file.empty()) {
    return Status::InvalidArgument("a node's certificate toward its peers needs its key");
  }
  if (!files.cert_file.empty()) {
    if (Status st = auth::CheckCertificateAndKey(files.cert_file, files.key_file); !st.ok()) return st;
  }
  if (!files.ca_file.empty()) {
    if (Status st = auth::CheckCaFile(files.ca_file); !st.ok()) return st;
  }
  ERR_clear_error();
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_client);
  if (Status st = Harden(*ctx); !st.ok()) return st;
  boost::system::error_code ec;
  if (files.ca_file.empty()) {
    ctx->set_default_verify_paths(ec);
    if (ec) return Status::InvalidArgument("the system's CA store: " + Why(ec));
  } else {
    ctx->load_verify_file(files.ca_file, ec);
    if (ec) return Status::InvalidArgument("TLS CA " + files.ca_file + ": " + Why(ec));
  }
  if (!files.cert_file.empty()) {
    if (Status st = UseIdentity(*ctx, files.cert_file, files.key_file); !st.ok()) return st;
  }
  ctx->set_verify_mode(ssl::verify_peer);
  ERR_clear_error();
  return ctx;
}

Result<std::shared_ptr<ssl::context>> MakeServerTlsContext(const TlsFiles& files) {
  if (files.cert_file.empty() || files.key_file.empty()) {
    return Status::InvalidArgument("TLS needs both a certificate file and a key file");
  }
  // The same checks (and messages) as the start's: a reload of a bad pair says what is wrong in the same words.
  if (Status st = auth::CheckCertificateAndKey(files.cert_file, files.key_file); !st.ok()) return st;
  ERR_clear_error();
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_server);
  SSL_CTX* native = ctx->native_handle();
  if (Status st = Harden(*ctx); !st.ok()) return st;
  if (Status st = UseIdentity(*ctx, files.cert_file, files.key_file); !st.ok()) return st;
  boost::system::error_code ec;
  if (!files.client_ca_file.empty()) {
    ctx->load_verify_file(files.client_ca_file, ec);
    if (ec) return Status::InvalidArgument("TLS client CA " + files.client_ca_file + ": " + Why(ec));
    // The CA names a client is told it may present.
    if (STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(files.client_ca_file.c_str())) {
      SSL_CTX_set_client_CA_list(native, names);
    }
    ctx->set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
  } else {
    ctx->set_verify_mode(ssl::verify_none);
  }
  ERR_clear_error();
  return ctx;
}

}  // namespace inferd::http
