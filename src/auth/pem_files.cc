#include "auth/pem_files.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <cstdio>
#include <memory>

namespace inferd::auth {
namespace {

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};

Result<File> Open(const std::string& path, const char* what) {
  File f(std::fopen(path.c_str(), "rb"));
  if (!f) return Status::InvalidArgument(std::string("cannot read ") + what + " " + path);
  return f;
}

Result<std::unique_ptr<X509, X509Free>> FirstCertificate(const std::string& path, const char* what) {
  auto f = Open(path, what);
  if (!f.ok()) return f.status();
  std::unique_ptr<X509, X509Free> cert(PEM_read_X509(f->get(), nullptr, nullptr, nullptr));
  ERR_clear_error();
  if (!cert) return Status::InvalidArgument(std::string(what) + " " + path + " holds no PEM certificate");
  return cert;
}

}  // namespace

Status CheckCertificateAndKey(const std::string& cert_file, const std::string& key_file) {
  auto cert = FirstCertificate(cert_file, "the TLS certificate");
  if (!cert.ok()) return cert.status();
  auto f = Open(key_file, "the TLS key");
  if (!f.ok()) return f.status();
  std::unique_ptr<EVP_PKEY, KeyFree> key(PEM_read_PrivateKey(f->get(), nullptr, nullptr, nullptr));
  ERR_clear_error();
  if (!key) return Status::InvalidArgument("the TLS key " + key_file + " holds no (unencrypted) PEM private key");
  if (X509_check_private_key(cert->get(), key.get()) != 1) {
    ERR_clear_error();
    return Status::InvalidArgument("the TLS key " + key_file + " does not match the certificate " + cert_file);
  }
  return Status::OK();
}

Status CheckCaFile(const std::string& ca_file) {
  auto cert = FirstCertificate(ca_file, "the TLS client CA file");
  return cert.ok() ? Status::OK() : cert.status();
}

}  // namespace inferd::auth
