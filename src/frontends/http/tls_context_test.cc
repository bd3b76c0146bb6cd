#include "frontends/http/tls_context.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "auth/pem_files.h"

namespace inferd::http {
namespace {

namespace fs = std::filesystem;

// A self-signed EC certificate and its key, written as PEM files.
void WritePair(const fs::path& cert, const fs::path& key, const char* cn) {
  EVP_PKEY* pkey = EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256");
  ASSERT_NE(pkey, nullptr);
  X509* x = X509_new();
  ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
  X509_gmtime_adj(X509_getm_notBefore(x), 0);
  X509_gmtime_adj(X509_getm_notAfter(x), 3600);
  X509_set_pubkey(x, pkey);
  X509_NAME* name = X509_get_subject_name(x);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(cn), -1, -1, 0);
  X509_set_issuer_name(x, name);
  ASSERT_GT(X509_sign(x, pkey, EVP_sha256()), 0);
  std::FILE* f = std::fopen(cert.c_str(), "w");
  PEM_write_X509(f, x);
  std::fclose(f);
  f = std::fopen(key.c_str(), "w");
  PEM_write_PrivateKey(f, pkey, nullptr, nullptr, 0, nullptr, nullptr);
  std::fclose(f);
  X509_free(x);
  EVP_PKEY_free(pkey);
}

class TlsContextTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("inferd_tls_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    WritePair(dir_ / "a.pem", dir_ / "a.key", "a");
    WritePair(dir_ / "b.pem", dir_ / "b.key", "b");
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string P(const char* name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

TEST_F(TlsContextTest, AMatchingPairMakesAContextWithOrWithoutClientCertificates) {
  EXPECT_TRUE(MakeServerTlsContext({P("a.pem"), P("a.key"), ""}).ok());
  auto mutual = MakeServerTlsContext({P("a.pem"), P("a.key"), P("b.pem")});
  ASSERT_TRUE(mutual.ok()) << mutual.status().ToString();
  EXPECT_EQ(SSL_CTX_get_min_proto_version((*mutual)->native_handle()), TLS1_2_VERSION);
  EXPECT_NE(SSL_CTX_get_verify_mode((*mutual)->native_handle()) & SSL_VERIFY_FAIL_IF_NO_PEER_CERT, 0);
}

TEST_F(TlsContextTest, BadFilesAreRefusedNamingTheFile) {
  EXPECT_EQ(MakeServerTlsContext({P("a.pem"), P("b.key"), ""}).status().message(),
            "the TLS key " + P("b.key") + " does not match the certificate " + P("a.pem"));
  EXPECT_EQ(MakeServerTlsContext({P("a.key"), P("a.key"), ""}).status().message(),
            "the TLS certificate " + P("a.key") + " holds no PEM certificate");
  EXPECT_EQ(MakeServerTlsContext({P("a.pem"), P("a.pem"), ""}).status().message(),
            "the TLS key " + P("a.pem") + " holds no (unencrypted) PEM private key");
  EXPECT_EQ(MakeServerTlsContext({P("missing.pem"), P("a.key"), ""}).status().message(),
            "cannot read the TLS certificate " + P("missing.pem"));
  std::ofstream(dir_ / "empty.pem") << "";
  EXPECT_EQ(MakeServerTlsContext({P("a.pem"), P("a.key"), P("empty.pem")}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(auth::CheckCaFile(P("empty.pem")).message(),
            "the TLS client CA file " + P("empty.pem") + " holds no PEM certificate");
  EXPECT_EQ(MakeServerTlsContext({"", "", ""}).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace inferd::http
