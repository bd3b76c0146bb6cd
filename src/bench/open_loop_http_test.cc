#include "bench/open_loop_http.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "bench/http_client.h"
#include "core/mutex.h"

namespace inferd::bench {
namespace {

// A blocking HTTP/1.1 server on 127.0.0.1 with one thread per connection,
// answering every request the same way.
class TestServer {
 public:
  struct Behaviour {
    int status = 200;
    bool close_header = false;    // answers with "Connection: close" and closes
    bool close_silently = false;  // closes after each answer without saying so (a keep-alive timeout)
  };

  explicit TestServer(Behaviour b) : b_(b) {
    listen_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(listen_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(::listen(listen_, 128), 0);
    socklen_t len = sizeof a;
    ::getsockname(listen_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    acceptor_ = std::thread([this] { AcceptLoop(); });
  }
  ~TestServer() {
    ::shutdown(listen_, SHUT_RDWR);
    acceptor_.join();
    {
      MutexLock g(&mu_);
      for (int fd : fds_) ::shutdown(fd, SHUT_RDWR);
    }
    std::vector<std::thread> sessions;
    {
      MutexLock g(&mu_);
      sessions.swap(sessions_);  // the acceptor has stopped: no more are added
    }
    for (auto& t : sessions) t.join();
    MutexLock g(&mu_);
    for (int fd : fds_) ::close(fd);
    ::close(listen_);
  }

  uint16_t port() const { return port_; }
  int accepted() const { return accepted_.load(); }
  int requests() const { return requests_.load(); }
  int most_open() const { return most_open_.load(); }
  std::string last_request() {
    MutexLock g(&mu_);
    return last_request_;
  }

 private:
  void AcceptLoop() {
    while (true) {
      const int fd = ::accept(listen_, nullptr, nullptr);
      if (fd < 0) return;  // shut down
      ++accepted_;
      const int now_open = ++open_;
      for (int m = most_open_.load(); now_open > m && !most_open_.compare_exchange_weak(m, now_open);) {
      }
      MutexLock g(&mu_);
      fds_.push_back(fd);
      sessions_.emplace_back([this, fd] { Serve(fd); });
    }
  }

  void Serve(int fd) {
    std::string buf;
    char tmp[4096];
    while (true) {
      auto frame = RequestEnd(buf);
      while (!frame) {
        const ssize_t n = ::recv(fd, tmp, sizeof tmp, 0);
        if (n <= 0) {
          --open_;
          return;
        }
        buf.append(tmp, static_cast<size_t>(n));
        frame = RequestEnd(buf);
      }
      {
        MutexLock g(&mu_);
        last_request_ = buf.substr(0, *frame);
      }
      buf.erase(0, *frame);
      ++requests_;
      const std::string body = b_.status == 200 ? "ok" : "boom";
      std::string answer = "HTTP/1.1 " + std::to_string(b_.status) +
                           " X\r\nContent-Length: " + std::to_string(body.size()) + "\r\n" +
                           (b_.close_header ? "Connection: close\r\n" : "") + "\r\n" + body;
      ::send(fd, answer.data(), answer.size(), MSG_NOSIGNAL);
      if (b_.close_header || b_.close_silently) {
        ::shutdown(fd, SHUT_RDWR);
        --open_;
        return;
      }
    }
  }

  // The length of the first whole request in `buf`, if there is one.
  static std::optional<size_t> RequestEnd(const std::string& buf) {
    const size_t head = buf.find("\r\n\r\n");
    if (head == std::string::npos) return std::nullopt;
    const size_t cl = buf.find("Content-Length: ");
    const size_t length = cl < head ? std::stoul(buf.substr(cl + 16)) : 0;
    if (buf.size() < head + 4 + length) return std::nullopt;
    return head + 4 + length;
  }

  const Behaviour b_;
  int listen_ = -1;
  uint16_t port_ = 0;
  std::thread acceptor_;
  Mutex mu_;
  std::vector<int> fds_ TSA_GUARDED_BY(mu_);
  std::vector<std::thread> sessions_ TSA_GUARDED_BY(mu_);
  std::string last_request_ TSA_GUARDED_BY(mu_);
  std::atomic<int> accepted_{0}, requests_{0}, open_{0}, most_open_{0};
};

struct Recorded {
  std::vector<Sample> samples;
  std::vector<std::string> errors;
};

// Runs `n` requests, all due at once (the loop sends them as fast as
// connections allow: nothing in the test waits on a clock).
Recorded Drive(uint16_t port, int n, int max_connections, const std::atomic<bool>* stop = nullptr,
               std::function<void(const Recorded&)> after_each = nullptr) {
  std::vector<PreparedRequest> requests{{"/v2/models/m/infer", R"({"inputs":[]})", {{"X-Test", "1"}}}};
  std::vector<double> arrivals(static_cast<size_t>(n), 0.0);
  std::atomic<bool> never{false};
  Recorded r;
  RunOpenLoopHttp({"127.0.0.1", port, max_connections}, requests, arrivals, std::chrono::steady_clock::now(),
                  stop ? *stop : never, [&](const Sample& s, const std::string& error) {
                    r.samples.push_back(s);
                    r.errors.push_back(error);
                    if (after_each) after_each(r);
                  });
  return r;
}

TEST(OpenLoopHttp, AnswersEveryRequestOnAtMostTheAllowedConnections) {
  TestServer server({});
  Recorded r = Drive(server.port(), 300, 3);
  ASSERT_EQ(r.samples.size(), 300u);
  for (size_t i = 0; i < r.samples.size(); ++i) {
    EXPECT_TRUE(r.samples[i].ok) << r.errors[i];
    EXPECT_GE(r.samples[i].latency_us, 0);
  }
  EXPECT_EQ(server.requests(), 300);
  EXPECT_LE(server.accepted(), 3);  // kept alive: no connection per request
  EXPECT_LE(server.most_open(), 3);
  const std::string req = server.last_request();
  EXPECT_EQ(req.rfind("POST /v2/models/m/infer HTTP/1.1\r\n", 0), 0u) << req;
  EXPECT_NE(req.find("X-Test: 1\r\n"), std::string::npos) << req;
  EXPECT_NE(req.find("\r\n\r\n{\"inputs\":[]}"), std::string::npos) << req;
}

TEST(OpenLoopHttp, AnErrorStatusIsAFailedSampleWithTheAnswer) {
  TestServer server({.status = 503});
  Recorded r = Drive(server.port(), 5, 2);
  ASSERT_EQ(r.samples.size(), 5u);
  for (size_t i = 0; i < r.samples.size(); ++i) {
    EXPECT_FALSE(r.samples[i].ok);
    EXPECT_EQ(r.errors[i], "HTTP 503: boom");
  }
}

TEST(OpenLoopHttp, ConnectionsTheServerClosesAreReopenedAndNothingIsLost) {
  for (TestServer::Behaviour b :
       {TestServer::Behaviour{.close_header = true}, TestServer::Behaviour{.close_silently = true}}) {
    TestServer server(b);
    Recorded r = Drive(server.port(), 40, 2);
    ASSERT_EQ(r.samples.size(), 40u);
    for (size_t i = 0; i < r.samples.size(); ++i) EXPECT_TRUE(r.samples[i].ok) << r.errors[i];
    EXPECT_EQ(server.requests(), 40);
    EXPECT_GE(server.accepted(), 40);  // one connection per request
  }
}

TEST(OpenLoopHttp, NoServerFailsEveryRequestWithTheReason) {
  uint16_t port;
  {
    TestServer gone({});
    port = gone.port();
  }  // closed: nothing listens there now
  Recorded r = Drive(port, 4, 2);
  ASSERT_EQ(r.samples.size(), 4u);
  for (size_t i = 0; i < r.samples.size(); ++i) {
    EXPECT_FALSE(r.samples[i].ok);
    EXPECT_NE(r.errors[i].find("cannot connect to 127.0.0.1"), std::string::npos) << r.errors[i];
  }
}

TEST(OpenLoopHttp, StopEndsTheRunBeforeTheArrivalsRunOut) {
  TestServer server({});
  std::atomic<bool> stop{false};
  Recorded r = Drive(server.port(), 100000, 1, &stop, [&](const Recorded& so_far) {
    if (so_far.samples.size() == 10) stop = true;
  });
  EXPECT_GE(r.samples.size(), 10u);
  EXPECT_LT(r.samples.size(), 100000u);
}

TEST(FrameResponse, FramesWholeResponsesOnly) {
  const std::string whole = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabcHTTP/1.1";
  auto f = FrameResponse(whole);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(f->has_value());
  EXPECT_EQ((*f)->head.status, 200);
  EXPECT_EQ((*f)->head.headers.at("connection"), "close");
  EXPECT_EQ(whole.substr((*f)->body_start, (*f)->length - (*f)->body_start), "abc");
  for (size_t cut : {size_t{0}, size_t{10}, whole.find("abc"), whole.find("abc") + 2}) {
    auto part = FrameResponse(std::string_view(whole).substr(0, cut));
    ASSERT_TRUE(part.ok());
    EXPECT_FALSE(part->has_value()) << cut;
  }
  EXPECT_FALSE(FrameResponse("SMTP nope\r\n\r\n").ok());
  EXPECT_FALSE(FrameResponse("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n").ok());
}

TEST(ParseUrl, TakesHttpAndHttpsWithTheirDefaultPorts) {
  EXPECT_EQ(*ParseUrl("http://127.0.0.1:8000"), std::make_pair(std::string("127.0.0.1"), uint16_t{8000}));
  EXPECT_EQ(*ParseUrl("http://localhost"), std::make_pair(std::string("localhost"), uint16_t{80}));
  EXPECT_EQ(*ParseUrl("https://localhost/v2"), std::make_pair(std::string("localhost"), uint16_t{443}));
  EXPECT_EQ(*ParseUrl("https://host:8443"), std::make_pair(std::string("host"), uint16_t{8443}));
  EXPECT_TRUE(IsHttpsUrl("https://host:8443"));
  EXPECT_FALSE(IsHttpsUrl("http://host:8443"));
  EXPECT_EQ(ParseUrl("ftp://host").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseUrl("https://:80").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseUrl("http://host:99999").status().code(), StatusCode::kInvalidArgument);
}

TEST(HttpClient, AnHttpsServerWhoseCertificateIsNotTrustedIsRefused) {
  // A CA file that does not exist: refused before any connection.
  EXPECT_EQ(MakeTlsClientContext("/nonexistent/ca.pem").status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace inferd::bench
