// The HTTP front end end to end (in process): an HttpServer on a free port
// over an InferenceServer, spoken to through a plain socket, so what is
// checked is the bytes on the wire: chunked transfer encoding and
// server-sent events for partial responses, the generate extension's JSON.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "backends/identity/identity_backend.h"
#include "frontends/http/http_server.h"
#include "frontends/http/router.h"
#include "server/inference_server.h"
#include "server/server_options.h"
#include "testing/parts_scheduler.h"

namespace inferd::http {
namespace {

namespace fs = std::filesystem;

class HttpFrontEndTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("inferd_http_test_" + std::to_string(::getpid()) + "_" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_ / "echo/1");
    std::ofstream(root_ / "echo/config.pbtxt") << R"(backend: "identity" max_batch_size: 8
      input [ { name: "x" data_type: TYPE_FP32 dims: [ 2 ] } ] output [ { name: "y" data_type: TYPE_FP32 dims: [ 2 ] } ]
      dynamic_batching { })";
    fs::create_directories(root_ / "words/1");
    std::ofstream(root_ / "words/config.pbtxt") << R"(backend: "identity" max_batch_size: 0
      input [ { name: "text_input" data_type: TYPE_STRING dims: [ 1 ] } ]
      output [ { name: "text_output" data_type: TYPE_STRING dims: [ 1 ] } ])";
    ASSERT_TRUE(backends_.Register(MakeIdentityBackend()).ok());
  }
  void TearDown() override {
    if (http_) http_->Stop(std::chrono::milliseconds(0));
    http_.reset();
    server_.reset();
    fs::remove_all(root_);
  }

  void Start(const SchedulerFactory* schedulers = nullptr) {
    ServerOptions o;
    o.schedulers = schedulers;
    o.model_repository = root_.string();
    server_ = std::make_unique<InferenceServer>(o, &backends_, &clock_);
    ASSERT_TRUE(server_->Start().ok());
    HttpServerOptions ho;
    ho.host = "127.0.0.1";
    ho.port = 0;
    http_ = std::make_unique<HttpServer>(ho, MakeApiHandler(server_.get()));
    ASSERT_TRUE(http_->Start().ok());
  }

  // Sends one request (Connection: close) and reads the whole answer, with a
  // bound on every read.
  std::string Exchange(const std::string& method, const std::string& path, const std::string& body,
                       const char* version = "HTTP/1.1") {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(http_->port());
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    std::string req = method + " " + path + " " + version +
                      "\r\nHost: x\r\nConnection: close\r\nContent-Length: " + std::to_string(body.size()) +
                      "\r\n\r\n" + body;
    EXPECT_EQ(::send(fd, req.data(), req.size(), 0), static_cast<ssize_t>(req.size()));
    std::string out;
    char buf[4096];
    for (;;) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 20000) != 1) {
        ADD_FAILURE() << "no answer within 20 s; so far: " << out;
        break;
      }
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
    ::close(fd);
    return out;
  }

  fs::path root_;
  BackendRegistry backends_;
  SteadyClock clock_;
  std::unique_ptr<InferenceServer> server_;
  std::unique_ptr<HttpServer> http_;
};

TEST_F(HttpFrontEndTest, GenerateStreamSendsEachPartAsAnEventInAChunk) {
  const SchedulerFactory parts = testing::PartsSchedulers();
  Start(&parts);
  const std::string out = Exchange("POST", "/v2/models/echo/generate_stream", R"({"x": [[1, 2], [3, 4], [5, 6]]})");
  const std::string head = out.substr(0, out.find("\r\n\r\n") + 4);
  EXPECT_EQ(head.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << out;
  EXPECT_NE(head.find("Content-Type: text/event-stream; charset=utf-8\r\n"), std::string::npos) << head;
  EXPECT_NE(head.find("Transfer-Encoding: chunked\r\n"), std::string::npos) << head;
  EXPECT_EQ(head.find("Content-Length"), std::string::npos) << head;
  // One chunk per event, in order, then the last chunk (the final answer
  // carried no outputs).
  std::string expected;
  for (int row = 0; row < 3; ++row) {
    const std::string event = "data: {\"model_name\":\"echo\",\"model_version\":\"1\",\"y\":[" + std::to_string(row) +
                              "," + std::to_string(row) + "]}\n\n";
    char size[16];
    std::snprintf(size, sizeof size, "%zx\r\n", event.size());
    expected += size + event + "\r\n";
  }
  expected += "0\r\n\r\n";
  EXPECT_EQ(out.substr(head.size()), expected);
}

TEST_F(HttpFrontEndTest, HttpOneZeroClientsGetTheEventsUntilTheConnectionCloses) {
  const SchedulerFactory parts = testing::PartsSchedulers();
  Start(&parts);
  const std::string out = Exchange("POST", "/v2/models/echo/generate_stream", R"({"x": [[1, 2], [3, 4]]})", "HTTP/1.0");
  const std::string head = out.substr(0, out.find("\r\n\r\n") + 4);
  EXPECT_EQ(head.rfind("HTTP/1.0 200 OK\r\n", 0), 0u) << out;
  EXPECT_EQ(head.find("Transfer-Encoding"), std::string::npos) << head;
  EXPECT_EQ(out.substr(head.size()),
            "data: {\"model_name\":\"echo\",\"model_version\":\"1\",\"y\":[0,0]}\n\n"
            "data: {\"model_name\":\"echo\",\"model_version\":\"1\",\"y\":[1,1]}\n\n");
}

TEST_F(HttpFrontEndTest, AModelThatAnswersInPartsRefusesTheOneAnswerRoutes) {
  const SchedulerFactory parts = testing::PartsSchedulers();
  Start(&parts);
  const std::string out = Exchange("POST", "/v2/models/echo/generate", R"({"x": [[1, 2]]})");
  EXPECT_EQ(out.rfind("HTTP/1.1 400 Bad Request\r\n", 0), 0u) << out;
  EXPECT_NE(out.find(R"({"error":"this model answers in parts: use a streaming API"})"), std::string::npos) << out;
}

TEST_F(HttpFrontEndTest, GenerateMapsKeysToInputsAndOutputsToKeys) {
  Start();
  std::string out = Exchange("POST", "/v2/models/words/generate", R"({"text_input": "hello", "id": "r1"})");
  EXPECT_EQ(out.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << out;
  EXPECT_NE(out.find("Content-Length: "), std::string::npos) << out;
  EXPECT_EQ(out.substr(out.find("\r\n\r\n") + 4),
            R"({"model_name":"words","model_version":"1","id":"r1","text_output":"hello"})");
  // A one-answer model on the stream route: one event, sent whole.
  out = Exchange("POST", "/v2/models/echo/generate_stream", R"({"x": [1.5, 2]})");
  EXPECT_NE(out.find("Content-Type: text/event-stream; charset=utf-8\r\n"), std::string::npos) << out;
  EXPECT_EQ(out.substr(out.find("\r\n\r\n") + 4),
            "data: {\"model_name\":\"echo\",\"model_version\":\"1\",\"y\":[1.5,2]}\n\n");
  // Errors before the first event are plain HTTP errors.
  out = Exchange("POST", "/v2/models/echo/generate_stream", R"({"z": 1})");
  EXPECT_EQ(out.rfind("HTTP/1.1 400 Bad Request\r\n", 0), 0u) << out;
  EXPECT_NE(out.find("unexpected key 'z' in generate request: the model's inputs are x (plus 'id' and 'parameters')"),
            std::string::npos)
      << out;
  out = Exchange("GET", "/v2/models/echo/generate", "");
  EXPECT_EQ(out.rfind("HTTP/1.1 405 Method Not Allowed\r\n", 0), 0u) << out;
  out = Exchange("POST", "/v2/models/ghost/generate", "{}");
  EXPECT_EQ(out.rfind("HTTP/1.1 404 Not Found\r\n", 0), 0u) << out;
}

}  // namespace
}  // namespace inferd::http
