#include "frontends/http/tls_context.h"

#include <gtest/gtest.h>
#include <openssl/ssl.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "auth/pem_files.h"
#include "frontends/http/test_certificates.h"

namespace inferd::http {
namespace {

namespace fs = std::filesystem;
using test_certs::WriteSelfSigned;

class TlsContextTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("inferd_tls_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    WriteSelfSigned(dir_ / "a.pem", dir_ / "a.key", "a");
    WriteSelfSigned(dir_ / "b.pem", dir_ / "b.key", "b");
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
