// The gRPC port's own HTTP/2 (frontends/grpc/h2_port.h): bytes from a client
// connection -- HTTP/2 frames, HPACK headers, gRPC's length-prefixed and
// compressed messages, grpc-timeout, -bin metadata -- through nghttp2 and the
// port's framing, with handlers that answer as the real ones do (a unary
// call answered after its last message, a stream answering each message and
// acknowledging it to flow control). The first byte picks how the bytes are
// split (frames cut anywhere); the client preface is added before the rest.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "frontends/grpc/h2_port.h"

namespace {

using inferd::grpcfe::H2Call;
using inferd::grpcfe::H2Handler;

class Echo final : public H2Handler {
 public:
  explicit Echo(std::shared_ptr<H2Call> call) : call_(std::move(call)), stream_(call_->path() == "/t/Stream") {}
  void OnMessage(std::string m) override {
    if (stream_) {
      call_->SendMessage(m);
      call_->Consumed(m.size());
    } else {
      got_ += m;
    }
  }
  void OnHalfClose() override {
    call_->SendInitialMetadata({{"x-n", std::to_string(got_.size())}, {"x-peer-bin", call_->peer()}});
    if (!stream_) call_->SendMessage(got_);
    call_->Finish(0, "", {{"x-meta", std::string(call_->Metadata("x-meta"))}});
  }
  void OnCancel() override {}
  void OnDeadline() override { call_->Finish(4, "deadline \xff%"); }
  bool ManualFlowControl() const override { return stream_; }

 private:
  std::shared_ptr<H2Call> call_;
  const bool stream_;
  std::string got_;
};

inferd::grpcfe::H2Port& Port() {
  static inferd::grpcfe::H2Port* port = [] {
    inferd::grpcfe::H2PortOptions o;
    o.max_message_bytes = 1 << 16;
    return new inferd::grpcfe::H2Port(o, [](const std::shared_ptr<H2Call>& call) -> std::shared_ptr<H2Handler> {
      if (call->path() == "/t/None") return nullptr;
      return std::make_shared<Echo>(call);
    });
  }();
  return *port;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const std::string kPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
  const size_t chunk = data[0] == 0 ? size : data[0];
  std::string bytes = kPreface;
  bytes.append(reinterpret_cast<const char*>(data + 1), size - 1);
  Port().ServeBytes(bytes, chunk);
  return 0;
}
