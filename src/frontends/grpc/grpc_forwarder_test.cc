// GrpcForwarder against a peer that is not there: the call fails before any
// answer (Events::done with UNAVAILABLE and no head), so the forward stage
// marks the peer down and tries the next copy. Forwarding to a live peer is
// covered by the Cluster integration suites.
#include "frontends/grpc/grpc_forwarder.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <future>

namespace inferd::grpcfe {
namespace {

// A loopback port nothing listens on (bound, then closed).
int ClosedPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

struct Outcome {
  bool head = false;
  std::string grpc_status;  // of a relayed failure
  Status done;
};

Outcome ForwardTo(GrpcForwarder& f, const std::string& method,
                  std::chrono::system_clock::time_point deadline = std::chrono::system_clock::time_point::max()) {
  auto wire = std::make_shared<WireRequest>();
  wire->deadline = deadline;
  wire->protocol = WireRequest::Protocol::kGrpc;
  wire->target = method;
  wire->headers = {{"authorization", "Bearer x"}};
  wire->body = std::make_shared<const std::string>("\n\x03mlp");  // ModelInferRequest{model_name: "mlp"}
  auto outcome = std::make_shared<Outcome>();
  std::promise<void> finished;
  Forwarder::Events ev;
  ev.head = [outcome](int, std::vector<std::pair<std::string, std::string>> headers, bool) {
    outcome->head = true;
    for (const auto& [k, v] : headers)
      if (k == "grpc-status") outcome->grpc_status = v;
  };
  ev.body = [](std::string) { return true; };
  ev.done = [outcome, &finished](Status st) {
    outcome->done = std::move(st);
    finished.set_value();
  };
  f.Forward("127.0.0.1:" + std::to_string(ClosedPort()), wire, "a", std::move(ev));
  EXPECT_EQ(finished.get_future().wait_for(std::chrono::seconds(30)), std::future_status::ready);
  return *outcome;
}

TEST(GrpcForwarderTest, APeerThatIsNotThereFailsBeforeAnyAnswer) {
  GrpcForwarderOptions o;
  o.connect_timeout = std::chrono::milliseconds(500);
  GrpcForwarder f(o);
  for (const char* method : {kModelInferMethod, kModelStreamInferMethod}) {
    const Outcome out = ForwardTo(f, method);
    EXPECT_FALSE(out.head) << method;
    EXPECT_EQ(out.done.code(), StatusCode::kUnavailable) << method << ": " << out.done.message();
  }
  f.Stop();
}

// The client's deadline goes with the forwarded call: one already past ends it as DEADLINE_EXCEEDED, relayed as
// the answer (not UNAVAILABLE: no other copy is tried for a client that stopped waiting).
TEST(GrpcForwarderTest, TheClientsDeadlineIsPassedOn) {
  GrpcForwarderOptions o;
  o.connect_timeout = std::chrono::milliseconds(500);
  GrpcForwarder f(o);
  for (const char* method : {kModelInferMethod, kModelStreamInferMethod}) {
    const Outcome out = ForwardTo(f, method, std::chrono::system_clock::now() - std::chrono::seconds(1));
    EXPECT_TRUE(out.head) << method << ": " << out.done.message();
    EXPECT_EQ(out.grpc_status, "4") << method;  // DEADLINE_EXCEEDED
    EXPECT_TRUE(out.done.ok()) << method;
  }
  f.Stop();
}

TEST(ProtocolForwarderTest, ARequestWithoutAForwarderForItsProtocolFailsAsUnreachable) {
  ProtocolForwarder f(nullptr, nullptr);
  auto wire = std::make_shared<WireRequest>();
  Status got = Status::OK();
  Forwarder::Events ev;
  ev.done = [&got](Status st) { got = std::move(st); };
  f.Forward("127.0.0.1:1", wire, "a", std::move(ev));
  EXPECT_EQ(got.code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace inferd::grpcfe
