// H2Port against gRPC's own C++ client: unary and streaming calls, metadata
// (-bin included) both ways, messages larger than the HTTP/2 windows,
// compressed messages, the message size limit, deadlines, cancellation,
// unknown methods and encodings, and a drain (StopAccepting) that lets an
// open call finish while new ones are refused.
#include "frontends/grpc/h2_port.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

namespace inferd::grpcfe {
namespace {

using namespace std::chrono_literals;

// What the test handlers saw, for the test to wait on (bounded).
struct Seen {
  std::mutex mu;
  std::condition_variable cv;
  int cancels = 0;
  int deadlines = 0;
  std::vector<std::shared_ptr<H2Call>> hanging;  // calls left unanswered, for the test to finish
  template <typename Pred>
  bool WaitFor(Pred pred) {
    std::unique_lock<std::mutex> l(mu);
    return cv.wait_for(l, 30s, pred);
  }
  void Note(const std::function<void()>& f) {
    {
      std::lock_guard<std::mutex> l(mu);
      f();
    }
    cv.notify_all();
  }
};

// /t/Echo: answers the messages it got, joined, when the client half-closes; echoes the metadata back.
// /t/Stream: answers each message as it comes (manual flow control: consumed once answered).
// /t/Hang: never answers (until the test does); counts cancels and deadlines.
class TestHandler final : public H2Handler {
 public:
  TestHandler(std::shared_ptr<H2Call> call, Seen* seen) : call_(std::move(call)), seen_(seen) {
    stream_ = call_->path() == "/t/Stream";
    hang_ = call_->path() == "/t/Hang";
  }
  void OnMessage(std::string m) override {
    if (stream_) {
      call_->SendMessage("echo:" + m);
      call_->Consumed(m.size());
      return;
    }
    got_ += m;
  }
  void OnHalfClose() override {
    if (hang_) return seen_->Note([&] { seen_->hanging.push_back(call_); });
    if (stream_) return call_->Finish(0, "");
    MetadataList initial, trailing;
    for (const auto& [k, v] : call_->metadata()) {
      if (k.rfind("x-", 0) == 0) {
        initial.emplace_back(k, v);
        trailing.emplace_back(k + "-t", v);
      }
    }
    initial.emplace_back("x-peer", call_->peer());
    call_->SendInitialMetadata(std::move(initial));
    call_->SendMessage(got_);
    call_->Finish(0, "", std::move(trailing));
  }
  void OnCancel() override {
    seen_->Note([&] { ++seen_->cancels; });
  }
  void OnDeadline() override {
    seen_->Note([&] { ++seen_->deadlines; });
    call_->Finish(4, "deadline");
  }
  bool ManualFlowControl() const override { return stream_; }

 private:
  std::shared_ptr<H2Call> call_;
  Seen* seen_;
  bool stream_ = false, hang_ = false;
  std::string got_;
};

class H2PortTest : public ::testing::Test {
 protected:
  void SetUp() override {
    H2PortOptions o;
    o.host = "127.0.0.1";
    o.port = 0;
    o.max_message_bytes = 8 << 20;
    port_ = std::make_unique<H2Port>(o, [this](const std::shared_ptr<H2Call>& call) -> std::shared_ptr<H2Handler> {
      if (call->path().rfind("/t/", 0) != 0) return nullptr;
      return std::make_shared<TestHandler>(call, &seen_);
    });
    ASSERT_TRUE(port_->Start().ok());
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);
    args.SetMaxSendMessageSize(-1);
    channel_ = grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port_->port()),
                                         grpc::InsecureChannelCredentials(), args);
    stub_ = std::make_unique<grpc::GenericStub>(channel_);
  }
  void TearDown() override {
    for (auto& c : seen_.hanging) c->Finish(1, "test over");
    port_->Stop();
    seen_.hanging.clear();  // calls must not outlive their port
  }

  struct Answer {
    grpc::Status status;
    std::string body;
  };
  Answer Unary(const std::string& path, const std::string& body, grpc::ClientContext* ctx) {
    grpc::Slice slice(body);
    grpc::ByteBuffer req(&slice, 1), resp;
    std::promise<grpc::Status> done;
    stub_->UnaryCall(ctx, path, grpc::StubOptions(), &req, &resp, [&](grpc::Status st) { done.set_value(st); });
    auto f = done.get_future();
    EXPECT_EQ(f.wait_for(60s), std::future_status::ready);
    Answer a{f.get(), {}};
    std::vector<grpc::Slice> slices;
    if (a.status.ok() && resp.Dump(&slices).ok()) {
      for (auto& s : slices) a.body.append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
    return a;
  }
  Answer Unary(const std::string& path, const std::string& body) {
    grpc::ClientContext ctx;
    return Unary(path, body, &ctx);
  }

  Seen seen_;
  std::unique_ptr<H2Port> port_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<grpc::GenericStub> stub_;
};

std::string Md(const std::multimap<grpc::string_ref, grpc::string_ref>& md, const std::string& key) {
  auto it = md.find(key);
  return it == md.end() ? "<none>" : std::string(it->second.data(), it->second.size());
}

TEST_F(H2PortTest, UnaryCallCarriesMetadataBothWays) {
  grpc::ClientContext ctx;
  ctx.AddMetadata("x-text", "hello");
  const std::string binary("\0\x01\xff\x7fz", 5);
  ctx.AddMetadata("x-blob-bin", binary);
  Answer a = Unary("/t/Echo", "ping", &ctx);
  ASSERT_TRUE(a.status.ok()) << a.status.error_message();
  EXPECT_EQ(a.body, "ping");
  EXPECT_EQ(Md(ctx.GetServerInitialMetadata(), "x-text"), "hello");
  EXPECT_EQ(Md(ctx.GetServerInitialMetadata(), "x-blob-bin"), binary);
  EXPECT_EQ(Md(ctx.GetServerTrailingMetadata(), "x-text-t"), "hello");
  EXPECT_EQ(Md(ctx.GetServerTrailingMetadata(), "x-blob-bin-t"), binary);
  EXPECT_EQ(Md(ctx.GetServerInitialMetadata(), "x-peer").rfind("127.0.0.1:", 0), 0u);
}

TEST_F(H2PortTest, MessagesLargerThanTheWindowsAndCompressedOnesArriveWhole) {
  std::string big(6 << 20, 'x');
  for (size_t i = 0; i < big.size(); i += 4099) big[i] = static_cast<char>('a' + i % 26);
  Answer a = Unary("/t/Echo", big);
  ASSERT_TRUE(a.status.ok()) << a.status.error_message();
  EXPECT_EQ(a.body, big);
  grpc::ClientContext ctx;
  ctx.set_compression_algorithm(GRPC_COMPRESS_GZIP);
  a = Unary("/t/Echo", big, &ctx);
  ASSERT_TRUE(a.status.ok()) << a.status.error_message();
  EXPECT_EQ(a.body, big);
}

TEST_F(H2PortTest, MessageOverTheLimitIsResourceExhaustedAndThePortGoesOn) {
  Answer a = Unary("/t/Echo", std::string((8 << 20) + 1, 'x'));
  EXPECT_EQ(a.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << a.status.error_message();
  // Compressed small, large once decompressed: the same limit.
  grpc::ClientContext ctx;
  ctx.set_compression_algorithm(GRPC_COMPRESS_GZIP);
  a = Unary("/t/Echo", std::string((8 << 20) + 1, 'x'), &ctx);
  EXPECT_EQ(a.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << a.status.error_message();
  EXPECT_EQ(Unary("/t/Echo", "still").body, "still");
}

TEST_F(H2PortTest, UnknownMethodIsUnimplemented) {
  Answer a = Unary("/nope.Service/Method", "x");
  EXPECT_EQ(a.status.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_NE(a.status.error_message().find("/nope.Service/Method"), std::string::npos);
}

// A bidi stream: every message answered in order; the client's 200 messages pass its window only because the
// handler reports them consumed.
TEST_F(H2PortTest, StreamAnswersEveryMessageInOrder) {
  class Client : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
   public:
    explicit Client(int n) : n_(n) {}
    void Go(grpc::GenericStub* stub) {
      stub->PrepareBidiStreamingCall(&ctx_, "/t/Stream", grpc::StubOptions(), this);
      StartRead(&in_);
      Next();
      StartCall();
    }
    void OnWriteDone(bool ok) override {
      if (ok) Next();
    }
    void OnReadDone(bool ok) override {
      if (!ok) return;
      std::vector<grpc::Slice> slices;
      std::string s;
      if (in_.Dump(&slices).ok())
        for (auto& sl : slices) s.append(reinterpret_cast<const char*>(sl.begin()), sl.size());
      got_.push_back(s);
      StartRead(&in_);
    }
    void OnDone(const grpc::Status& st) override { done_.set_value(st); }
    std::future<grpc::Status> Done() { return done_.get_future(); }
    const std::vector<std::string>& got() const { return got_; }

   private:
    void Next() {
      if (sent_ == n_) return StartWritesDone();
      std::string m = std::to_string(sent_++) + std::string(100000, '.');
      grpc::Slice s(m);
      out_ = grpc::ByteBuffer(&s, 1);
      StartWrite(&out_);
    }
    const int n_;
    int sent_ = 0;
    grpc::ClientContext ctx_;
    grpc::ByteBuffer out_, in_;
    std::vector<std::string> got_;
    std::promise<grpc::Status> done_;
  };
  Client c(200);
  auto done = c.Done();
  c.Go(stub_.get());
  ASSERT_EQ(done.wait_for(60s), std::future_status::ready);
  EXPECT_TRUE(done.get().ok());
  ASSERT_EQ(c.got().size(), 200u);
  for (int i = 0; i < 200; ++i) EXPECT_EQ(c.got()[i], "echo:" + std::to_string(i) + std::string(100000, '.'));
}

TEST_F(H2PortTest, DeadlineAndCancellationReachTheHandler) {
  // The connection first: under ThreadSanitizer on a loaded machine its setup alone outlasted a short deadline,
  // and a call whose deadline passes before it is sent never reaches the handler.
  ASSERT_TRUE(channel_->WaitForConnected(std::chrono::system_clock::now() + 30s));
  grpc::ClientContext late;
  late.set_deadline(std::chrono::system_clock::now() + 1500ms);
  grpc::Slice late_slice(std::string("x"));
  grpc::ByteBuffer late_req(&late_slice, 1), late_resp;
  std::promise<grpc::Status> late_done;
  stub_->UnaryCall(&late, "/t/Hang", grpc::StubOptions(), &late_req, &late_resp,
                   [&](grpc::Status st) { late_done.set_value(st); });
  ASSERT_TRUE(seen_.WaitFor([&] { return seen_.hanging.size() == 1; }));  // it reached the handler
  auto late_f = late_done.get_future();
  ASSERT_EQ(late_f.wait_for(60s), std::future_status::ready);
  EXPECT_EQ(late_f.get().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  // The port's timer or the client's own (which resets the stream) ends it first: the handler hears either.
  EXPECT_TRUE(seen_.WaitFor([&] { return seen_.deadlines + seen_.cancels == 1; }));
  const int cancels_before = seen_.cancels;

  grpc::ClientContext gone;
  grpc::Slice slice(std::string("x"));
  grpc::ByteBuffer req(&slice, 1), resp;
  std::promise<grpc::Status> done;
  stub_->UnaryCall(&gone, "/t/Hang", grpc::StubOptions(), &req, &resp, [&](grpc::Status st) { done.set_value(st); });
  ASSERT_TRUE(seen_.WaitFor([&] { return seen_.hanging.size() == 2; }));
  gone.TryCancel();
  EXPECT_TRUE(seen_.WaitFor([&] { return seen_.cancels == cancels_before + 1; }));
  auto f = done.get_future();
  ASSERT_EQ(f.wait_for(60s), std::future_status::ready);
  EXPECT_EQ(f.get().error_code(), grpc::StatusCode::CANCELLED);
}

TEST_F(H2PortTest, DrainLetsOpenCallsFinishAndRefusesNewOnes) {
  grpc::ClientContext open;
  grpc::Slice slice(std::string("x"));
  grpc::ByteBuffer req(&slice, 1), resp;
  std::promise<grpc::Status> done;
  stub_->UnaryCall(&open, "/t/Hang", grpc::StubOptions(), &req, &resp, [&](grpc::Status st) { done.set_value(st); });
  ASSERT_TRUE(seen_.WaitFor([&] { return seen_.hanging.size() == 1; }));
  port_->StopAccepting();
  EXPECT_FALSE(port_->WaitForCalls(std::chrono::steady_clock::now() + 100ms));  // the open call
  grpc::ClientContext refused;
  refused.set_deadline(std::chrono::system_clock::now() + 10s);
  Answer a = Unary("/t/Echo", "new", &refused);
  EXPECT_EQ(a.status.error_code(), grpc::StatusCode::UNAVAILABLE) << a.status.error_message();
  seen_.hanging[0]->SendMessage("late answer");
  seen_.hanging[0]->Finish(0, "");
  seen_.hanging.clear();
  auto f = done.get_future();
  ASSERT_EQ(f.wait_for(60s), std::future_status::ready);
  EXPECT_TRUE(f.get().ok());
  EXPECT_TRUE(port_->WaitForCalls(std::chrono::steady_clock::now() + 30s));
}

TEST_F(H2PortTest, TakenPortFailsTheStart) {
  H2PortOptions o;
  o.host = "127.0.0.1";
  o.port = port_->port();
  H2Port second(o, [](const std::shared_ptr<H2Call>&) { return nullptr; });
  Status st = second.Start();
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_NE(st.message().find("cannot listen on 127.0.0.1:" + std::to_string(port_->port())), std::string::npos);
}

// A client that pings an idle connection every 20 ms breaks the ping policy: GOAWAY, closed; its next call
// opens a new connection and is served.
TEST_F(H2PortTest, ClientPingingTooOftenIsDisconnected) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 20);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  args.SetInt("grpc.http2.min_time_between_pings_ms", 10);
  auto pinger =
      grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port_->port()), grpc::InsecureChannelCredentials(), args);
  grpc::GenericStub stub(pinger);
  grpc::Slice slice(std::string("hi"));
  grpc::ByteBuffer req(&slice, 1), resp;
  grpc::ClientContext ctx;
  std::promise<grpc::Status> done;
  stub.UnaryCall(&ctx, "/t/Echo", grpc::StubOptions(), &req, &resp, [&](grpc::Status st) { done.set_value(st); });
  auto f = done.get_future();
  ASSERT_EQ(f.wait_for(60s), std::future_status::ready);
  ASSERT_TRUE(f.get().ok());
  const auto until = std::chrono::steady_clock::now() + 30s;
  while (port_->ping_strikeouts() == 0 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(5ms);  // polls a counter (bounded)
  EXPECT_GE(port_->ping_strikeouts(), 1u);
}

// A peer that never answers the port's keepalive ping is disconnected after keepalive_timeout.
TEST(H2Keepalive, UnansweredPingClosesTheConnection) {
  H2PortOptions o;
  o.host = "127.0.0.1";
  o.port = 0;
  o.keepalive_time = 50ms;
  o.keepalive_timeout = 100ms;
  o.keepalive_permit_without_calls = true;
  H2Port port(o, [](const std::shared_ptr<H2Call>&) { return nullptr; });
  ASSERT_TRUE(port.Start().ok());
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port.port());
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  const std::string hello = std::string("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n") + std::string("\0\0\0\x04\0\0\0\0\0", 9);
  ASSERT_EQ(send(fd, hello.data(), hello.size(), 0), static_cast<ssize_t>(hello.size()));
  // Read (never answering the ping) until the port closes the connection; bounded.
  bool closed = false;
  char buf[4096];
  const auto until = std::chrono::steady_clock::now() + 30s;
  while (!closed && std::chrono::steady_clock::now() < until) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 1000) <= 0) continue;
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    closed = n <= 0;
  }
  close(fd);
  EXPECT_TRUE(closed);
  EXPECT_EQ(port.keepalive_timeouts(), 1u);
  port.Stop();
}

TEST(H2Wire, TimeoutsAndPercentEncoding) {
  std::chrono::nanoseconds d;
  ASSERT_TRUE(ParseGrpcTimeout("250m", &d));
  EXPECT_EQ(d, 250ms);
  ASSERT_TRUE(ParseGrpcTimeout("3S", &d));
  EXPECT_EQ(d, 3s);
  ASSERT_TRUE(ParseGrpcTimeout("99999999H", &d));  // capped, no overflow
  EXPECT_GT(d, std::chrono::hours(24 * 365));
  EXPECT_FALSE(ParseGrpcTimeout("", &d));
  EXPECT_FALSE(ParseGrpcTimeout("m", &d));
  EXPECT_FALSE(ParseGrpcTimeout("12x", &d));
  EXPECT_FALSE(ParseGrpcTimeout("-1m", &d));
  EXPECT_FALSE(ParseGrpcTimeout("123456789S", &d));  // more than 8 digits
  EXPECT_EQ(PercentEncode("a b%c\n\xc3\xa9"), "a b%25c%0A%C3%A9");
}

}  // namespace
}  // namespace inferd::grpcfe
