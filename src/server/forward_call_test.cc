#include "server/forward_call.h"

#include <gtest/gtest.h>

#include <map>

#include "server/forwarder.h"
#include "testing/fake_clock.h"

namespace inferd {
namespace {

// Each address behaves as scripted, synchronously: "refuse" (503), "drop" (no answer), "answer" (200 "ok"),
// "break" (a head, then the connection drops), "stream" (a streamed answer in two parts).
class ScriptedForwarder final : public Forwarder {
 public:
  ScriptedForwarder(std::initializer_list<std::pair<const std::string, std::string>> script) : script_(script) {}
  void Forward(const std::string& address, std::shared_ptr<const WireRequest>, const std::string& from_node,
               Events ev) override {
    sent.push_back(address);
    EXPECT_EQ(from_node, "me");
    const std::string& what = script_.at(address);
    if (what == "drop") return ev.done(Status::Unavailable("connection refused"));
    if (what == "refuse") {
      ev.head(503, {}, false);
      ev.body("overloaded");
      return ev.done(Status::OK());
    }
    if (what == "stream") {
      ev.head(200, {{"Content-Type", "text/event-stream"}}, true);
      ev.body("part1");
      ev.body("part2");
      return ev.done(Status::OK());
    }
    ev.head(200, {{"Content-Type", "application/json"}}, false);
    ev.body("ok");
    ev.done(what == "break" ? Status::Unavailable("reset") : Status::OK());
  }
  std::vector<std::string> sent;

 private:
  const std::map<std::string, std::string> script_;
};

class ForwardToCopiesTest : public ::testing::Test {
 protected:
  ForwardToCopiesTest() : cluster_(Options(), nullptr, nullptr, 0, &clock_) {}
  static cluster::ClusterOptions Options() {
    cluster::ClusterOptions o;
    o.node_id = "me";
    return o;
  }
  static std::vector<ClusterService::Target> Targets(std::initializer_list<const char*> ids) {
    std::vector<ClusterService::Target> t;
    for (const char* id : ids) t.push_back({id, id, ""});
    return t;
  }
  // Runs one forward; the final answer (or nullopt when it was served here) and the parts.
  std::optional<Result<InferResponse>> Run(ScriptedForwarder& fwd, std::vector<ClusterService::Target> targets,
                                           bool streamed_sink = false) {
    std::optional<Result<InferResponse>> final;
    ResponseSink sink;
    if (streamed_sink) {
      sink.partial = [this](InferResponse part) {
        parts_.push_back(part.relayed->body);
        return true;
      };
    }
    sink.final = [&final](Result<InferResponse> r) { final = std::move(r); };
    auto wire = std::make_shared<WireRequest>();
    ForwardToCopies({&cluster_, &fwd, &clock_}, "m", wire, std::move(targets), std::move(sink),
                    [this](ResponseSink back) {
                      ++served_here_;
                      EXPECT_TRUE(back.final != nullptr) << "the sink comes back to be answered here";
                    });
    return final;
  }

  testing::FakeClock clock_;
  ClusterService cluster_;
  std::vector<std::string> parts_;
  int served_here_ = 0;
};

TEST_F(ForwardToCopiesTest, PeersThatRefuseOrDropAreSkippedAndTheNextOnesAnswerIsRelayed) {
  ScriptedForwarder fwd({{"a", "refuse"}, {"b", "drop"}, {"c", "answer"}});
  auto r = Run(fwd, Targets({"a", "b", "c"}));
  ASSERT_TRUE(r.has_value());
  ASSERT_TRUE(r->ok()) << r->status().ToString();
  ASSERT_NE((*r)->relayed, nullptr);
  EXPECT_EQ((*r)->relayed->status, 200);
  EXPECT_EQ((*r)->relayed->body, "ok");  // the refusal's body is not part of it
  const auto& h = (*r)->relayed->headers;
  EXPECT_NE(std::find(h.begin(), h.end(), std::make_pair(std::string(kServedByHeader), std::string("c"))), h.end());
  EXPECT_EQ(fwd.sent, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(cluster_.counters().forwarded.load(), 3u);
  EXPECT_EQ(cluster_.counters().forward_failures.load(), 2u);
  EXPECT_EQ(served_here_, 0);
}

TEST_F(ForwardToCopiesTest, WhenNoPeerAnswersTheRequestIsServedHere) {
  ScriptedForwarder fwd({{"a", "drop"}, {"b", "drop"}});
  auto r = Run(fwd, Targets({"a", "b"}));
  EXPECT_FALSE(r.has_value()) << "nothing answered through the sink";
  EXPECT_EQ(served_here_, 1);
  EXPECT_EQ(cluster_.counters().forward_fallbacks.load(), 1u);
}

TEST_F(ForwardToCopiesTest, TheLastPeersRefusalIsRelayedNotRetriedHere) {
  ScriptedForwarder fwd({{"a", "refuse"}});
  auto r = Run(fwd, Targets({"a"}));
  ASSERT_TRUE(r.has_value() && r->ok());
  EXPECT_EQ((*r)->relayed->status, 503);
  EXPECT_EQ(served_here_, 0);
}

TEST_F(ForwardToCopiesTest, AnAnswerThatBreaksOffIsUnavailableNotAnotherTry) {
  ScriptedForwarder fwd({{"a", "break"}, {"b", "answer"}});
  auto r = Run(fwd, Targets({"a", "b"}));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(fwd.sent, (std::vector<std::string>{"a"}));
}

TEST_F(ForwardToCopiesTest, AStreamGoesPartByPartOrWholeToASinkWithoutParts) {
  ScriptedForwarder fwd({{"a", "stream"}});
  auto r = Run(fwd, Targets({"a"}), /*streamed_sink=*/true);
  ASSERT_TRUE(r.has_value() && r->ok());
  EXPECT_EQ(parts_, (std::vector<std::string>{"", "part1", "part2"}));  // the head, then each piece
  EXPECT_EQ((*r)->relayed->body, "");
  auto whole = Run(fwd, Targets({"a"}));
  ASSERT_TRUE(whole.has_value() && whole->ok());
  EXPECT_EQ((*whole)->relayed->body, "part1part2");
}

TEST_F(ForwardToCopiesTest, APeerWithoutTheRequestsProtocolIsSkipped) {
  const std::vector<ClusterService::Target> t = {{"a", "a", ""}, {"b", "b", "b"}};  // a: no gRPC API
  ScriptedForwarder grpc_fwd({{"b", "answer"}});
  std::optional<Result<InferResponse>> final;
  auto wire = std::make_shared<WireRequest>();
  wire->protocol = WireRequest::Protocol::kGrpc;
  ForwardToCopies({&cluster_, &grpc_fwd, &clock_}, "m", wire, t,
                  ResponseSink{nullptr, [&final](Result<InferResponse> r) { final = std::move(r); }},
                  [](ResponseSink) { ADD_FAILURE() << "served here"; });
  ASSERT_TRUE(final.has_value() && final->ok());
  EXPECT_EQ(grpc_fwd.sent, (std::vector<std::string>{"b"}));
}

}  // namespace
}  // namespace inferd
