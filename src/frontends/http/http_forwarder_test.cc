#include "frontends/http/http_forwarder.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <future>

#include "frontends/http/http_server.h"
#include "frontends/http/test_certificates.h"

namespace inferd::http {
namespace {

namespace fs = std::filesystem;
using test_certs::WriteSelfSigned;

// What one forwarded request came to.
struct Outcome {
  int status = 0;  // 0: no head
  std::string body;
  Status done;
};

// A peer on 127.0.0.1 with mutual TLS (certificate "peer", clients must show one "peer" or "node" signed -- both
// self-signed, so the client CA file holds both), answering every request with its target.
class HttpForwarderTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("inferd_fwd_tls_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    WriteSelfSigned(dir_ / "peer.pem", dir_ / "peer.key", "peer");
    WriteSelfSigned(dir_ / "node.pem", dir_ / "node.key", "node");
    WriteSelfSigned(dir_ / "stranger.pem", dir_ / "stranger.key", "stranger");
    {
      std::FILE* out = std::fopen(P("clients.pem").c_str(), "w");
      for (const char* f : {"peer.pem", "node.pem"}) {
        std::FILE* in = std::fopen(P(f).c_str(), "r");
        char buf[4096];
        size_t n;
        while ((n = std::fread(buf, 1, sizeof buf, in)) > 0) std::fwrite(buf, 1, n, out);
        std::fclose(in);
      }
      std::fclose(out);
    }
    HttpServerOptions o;
    o.host = "127.0.0.1";
    o.port = 0;
    o.tls = {P("peer.pem"), P("peer.key"), P("clients.pem")};
    server_ = std::make_unique<HttpServer>(o, [](Request&& req, Responder respond) {
      Response r;
      r.content_type = "text/plain";
      r.body = "served " + req.path;
      respond(std::move(r));
    });
    ASSERT_TRUE(server_->Start().ok());
  }
  void TearDown() override {
    server_->Stop(std::chrono::milliseconds(0));
    fs::remove_all(dir_);
  }
  std::string P(const char* name) const { return (dir_ / name).string(); }

  Outcome Forward(HttpForwarder& f, const std::string& host) {
    auto wire = std::make_shared<WireRequest>();
    wire->method = "GET";
    wire->target = "/v2/models/m";
    auto outcome = std::make_shared<Outcome>();
    std::promise<void> finished;
    Forwarder::Events ev;
    ev.head = [outcome](int status, auto, bool) { outcome->status = status; };
    ev.body = [outcome](std::string piece) {
      outcome->body += piece;
      return true;
    };
    ev.done = [outcome, &finished](Status st) {
      outcome->done = std::move(st);
      finished.set_value();
    };
    f.Forward(host + ":" + std::to_string(server_->port()), wire, "node", std::move(ev));
    EXPECT_EQ(finished.get_future().wait_for(std::chrono::seconds(30)), std::future_status::ready);
    return *outcome;
  }

  fs::path dir_;
  std::unique_ptr<HttpServer> server_;
};

TEST_F(HttpForwarderTlsTest, ForwardsOverMutualTlsToAPeerItsCaSigned) {
  HttpForwarder f;
  ASSERT_TRUE(f.SetTls({true, P("peer.pem"), P("node.pem"), P("node.key")}).ok());
  for (int i = 0; i < 2; ++i) {  // the second on the pooled connection
    Outcome o = Forward(f, "127.0.0.1");
    EXPECT_TRUE(o.done.ok()) << o.done.ToString();
    EXPECT_EQ(o.status, 200);
    EXPECT_EQ(o.body, "served /v2/models/m");
  }
  f.Stop();
}

TEST_F(HttpForwarderTlsTest, APeerThatCannotBeTrustedOrRefusesTheNodeFailsBeforeAnAnswer) {
  struct Case {
    const char* what;
    PeerTlsFiles tls;
    const char* host;
  };
  const Case cases[] = {
      {"the peer's certificate chains to another CA",
       {true, P("stranger.pem"), P("node.pem"), P("node.key")},
       "127.0.0.1"},
      {"the certificate does not name the host", {true, P("peer.pem"), P("node.pem"), P("node.key")}, "localhost"},
      {"no certificate shown to a mutual-TLS peer", {true, P("peer.pem"), "", ""}, "127.0.0.1"},
      {"a certificate the peer does not trust",
       {true, P("peer.pem"), P("stranger.pem"), P("stranger.key")},
       "127.0.0.1"},
  };
  for (const Case& c : cases) {
    HttpForwarder f;
    ASSERT_TRUE(f.SetTls(c.tls).ok()) << c.what;
    Outcome o = Forward(f, c.host);
    EXPECT_EQ(o.status, 0) << c.what;  // no head: the request may go to another copy
    EXPECT_EQ(o.done.code(), StatusCode::kUnavailable) << c.what << ": " << o.done.ToString();
    f.Stop();
  }
  // Plain HTTP to the TLS port gets no answer either.
  HttpForwarder plain;
  Outcome o = Forward(plain, "127.0.0.1");
  EXPECT_EQ(o.status, 0);
  EXPECT_EQ(o.done.code(), StatusCode::kUnavailable);
  plain.Stop();
}

TEST_F(HttpForwarderTlsTest, ABadFileIsRefusedAndTheTlsInUseKept) {
  HttpForwarder f;
  ASSERT_TRUE(f.SetTls({true, P("peer.pem"), P("node.pem"), P("node.key")}).ok());
  Status st = f.SetTls({true, P("peer.pem"), P("node.pem"), P("peer.key")});  // a key of another certificate
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("node.pem"), std::string::npos) << st.message();
  EXPECT_EQ(f.SetTls({true, P("missing.pem"), "", ""}).code(), StatusCode::kInvalidArgument);
  Outcome o = Forward(f, "127.0.0.1");
  EXPECT_TRUE(o.done.ok()) << o.done.ToString();
  EXPECT_EQ(o.status, 200);
  f.Stop();
}

}  // namespace
}  // namespace inferd::http
