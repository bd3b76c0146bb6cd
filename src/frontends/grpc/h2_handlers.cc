// The gRPC port's calls when inferd's own HTTP/2 serves it (h2_port.h):
// ModelInfer is decoded and handed to the server facade here (the request
// path that matters for speed); every other method -- the other unary RPCs,
// ModelStreamInfer, health, reflection, management -- is handed, message by
// message, to gRPC's server running in the same process without a port, so
// that there is one implementation of each.
#include "frontends/grpc/h2_handlers.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/support/byte_buffer.h>

#include <deque>

#include "frontends/grpc/byte_buffers.h"
#include "frontends/grpc/grpc_codec.h"
#include "server/inference_server.h"

namespace inferd::grpcfe {
namespace {

constexpr std::string_view kModelInferPath = "/inference.GRPCInferenceService/ModelInfer";

// One ModelInfer call. Lives while the port or the model worker holds it.
class NativeInfer final : public H2Handler, public CallView, public std::enable_shared_from_this<NativeInfer> {
 public:
  NativeInfer(ServiceContext* ctx, std::shared_ptr<H2Call> call) : ctx_(ctx), call_(std::move(call)) {}

  void OnMessage(std::string message) override {
    ++messages_;
    message_ = std::move(message);
  }

  void OnHalfClose() override {
    if (messages_ != 1) return call_->Finish(grpc::StatusCode::INTERNAL, "a unary call takes exactly one message");
    if (!request_.ParseFromString(message_))
      return call_->Finish(grpc::StatusCode::INTERNAL, "the request is not a ModelInferRequest");
    std::string().swap(message_);
    started_ = true;
    ServeModelInfer(*ctx_, *this, request_, &response_, cancellation_,
                    [self = shared_from_this()](const grpc::Status& st) { self->Answer(st); });
  }

  void OnCancel() override {
    if (!started_ || answered_.load(std::memory_order_acquire)) return;
    cancellation_->Cancel();
    ctx_->server->CountClientCancellation();
  }

  void OnDeadline() override {
    if (answered_.load(std::memory_order_acquire)) return;
    if (started_) {
      cancellation_->Cancel();
      ctx_->server->CountClientCancellation();
    }
    call_->Finish(grpc::StatusCode::DEADLINE_EXCEEDED, "Deadline Exceeded");
  }

  // CallView
  std::string_view Metadata(std::string_view key) const override { return call_->Metadata(key); }
  void ForEachMetadata(const std::function<void(std::string_view, std::string_view)>& f) const override {
    for (const auto& [k, v] : call_->metadata()) f(k, v);
  }
  std::string Peer() const override { return call_->peer(); }
  std::chrono::system_clock::time_point Deadline() const override { return call_->deadline(); }
  void AddInitialMetadata(const std::string& key, const std::string& value) override {
    initial_.emplace_back(key, value);
  }

 private:
  // On the model worker (or inline, for an early error): the answer, encoded here, sent on the connection's thread.
  void Answer(const grpc::Status& st) {
    answered_.store(true, std::memory_order_release);
    std::string framed;
    if (st.ok()) {
      const size_t n = response_.ByteSizeLong();
      framed.resize(5 + n);
      framed[1] = static_cast<char>(n >> 24);
      framed[2] = static_cast<char>(n >> 16);
      framed[3] = static_cast<char>(n >> 8);
      framed[4] = static_cast<char>(n);
      response_.SerializeWithCachedSizesToArray(reinterpret_cast<uint8_t*>(framed.data() + 5));
    }
    call_->Reply(std::move(initial_), std::move(framed), st.error_code(), st.error_message());
  }

  ServiceContext* const ctx_;
  const std::shared_ptr<H2Call> call_;
  // On the connection's thread:
  int messages_ = 0;
  std::string message_;
  bool started_ = false;
  // Handed to ServeModelInfer; the worker fills the response and the metadata before it answers.
  inference::ModelInferRequest request_;
  inference::ModelInferResponse response_;
  MetadataList initial_;
  const std::shared_ptr<Cancellation> cancellation_ = std::make_shared<Cancellation>();
  std::atomic<bool> answered_{false};
};

MetadataList ToList(const std::multimap<grpc::string_ref, grpc::string_ref>& md) {
  MetadataList out;
  for (const auto& [k, v] : md) out.emplace_back(std::string(k.data(), k.size()), std::string(v.data(), v.size()));
  return out;
}

// Any other call: relayed to gRPC's server in the process, message by
// message in both directions. The client's messages are acknowledged to
// HTTP/2 flow control as gRPC takes them, so a stream that stops reading
// (ModelStreamInfer at --grpc-stream-max-in-flight) holds its client back.
class InProcessCall final : public H2Handler,
                            public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>,
                            public std::enable_shared_from_this<InProcessCall> {
 public:
  InProcessCall(std::shared_ptr<H2Call> call, OpenCount* open) : call_(std::move(call)), open_(open) {}

  void Start(grpc::GenericStub* stub) {
    open_->Add();  // until OnDone
    for (const auto& [k, v] : call_->metadata()) {
      if (k == "user-agent" || k == kClientAddressMetadata) continue;
      context_.AddMetadata(k, v);
    }
    context_.AddMetadata(std::string(kClientAddressMetadata), call_->peer());
    if (call_->deadline() != std::chrono::system_clock::time_point::max()) context_.set_deadline(call_->deadline());
    self_ = shared_from_this();  // until OnDone
    stub->PrepareBidiStreamingCall(&context_, call_->path(), grpc::StubOptions(), this);
    AddHold();  // see OnMessage
    StartRead(&read_);
    StartCall();
  }

  bool ManualFlowControl() const override { return true; }

  // The port's side (its connection's thread) starts writes while gRPC's may end the call: gRPC forbids starting
  // an operation once OnDone may run. A hold (taken at Start) keeps OnDone away while the port may still start
  // one; writes and writes-done are started under the lock and only while the hold is kept, and the hold goes
  // when the port has nothing more to start (after writes-done, a reset), or when the server has ended the call
  // (its read stream ended), whichever comes first.
  void OnMessage(std::string message) override {
    RecursiveMutexLock g(&mu_);
    if (!held_) return;
    pending_.push_back(BufferOf(message));
    if (writing_) return;
    writing_ = true;
    StartWrite(&pending_.front());
  }

  void OnHalfClose() override {
    bool release;
    {
      RecursiveMutexLock g(&mu_);
      half_closed_ = true;
      release = MaybeWritesDoneLocked();
    }
    if (release) RemoveHold();  // may run OnDone (and delete this) inline: last
  }

  void OnCancel() override {
    context_.TryCancel();
    bool release;
    {
      RecursiveMutexLock g(&mu_);
      release = held_;
      held_ = false;
    }
    if (release) RemoveHold();
  }
  void OnDeadline() override {}  // the context's deadline ends the call, with gRPC's status

  void OnReadInitialMetadataDone(bool ok) override {
    if (ok) SendInitialMetadataOnce();
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the server ended the call: nothing more is started on it
      bool release;
      {
        RecursiveMutexLock g(&mu_);
        release = held_;
        held_ = false;
      }
      if (release) RemoveHold();
      return;
    }
    // gRPC may run this reaction on another thread at the same time as the one above: the metadata goes first.
    SendInitialMetadataOnce();
    call_->SendMessage(BytesOf(read_));
    StartRead(&read_);
  }

  void OnWriteDone(bool ok) override {
    call_->Consumed(0);
    bool release = false;
    {
      RecursiveMutexLock g(&mu_);
      pending_.pop_front();
      writing_ = false;
      if (ok && held_) {
        if (!pending_.empty()) {
          writing_ = true;
          StartWrite(&pending_.front());
        } else {
          release = MaybeWritesDoneLocked();
        }
      }
    }
    if (release) RemoveHold();
  }

  void OnDone(const grpc::Status& st) override {
    MetadataList trailing = ToList(context_.GetServerTrailingMetadata());
    bool initial_due;
    {
      RecursiveMutexLock g(&mu_);
      initial_due = !initial_sent_;
      initial_sent_ = true;
    }
    if (initial_due) {  // no message came: the server's initial metadata goes with the status (Trailers-Only)
      MetadataList initial = ToList(context_.GetServerInitialMetadata());
      trailing.insert(trailing.begin(), initial.begin(), initial.end());
    }
    call_->Finish(st.error_code(), st.error_message(), std::move(trailing));
    OpenCount* open = open_;
    self_.reset();  // may delete this (and the port's call, whose timer needs the port's I/O context): before Done
    open->Done();
  }

 private:
  // After the client's last message is written: writes-done, and the hold can go (true: the caller removes it,
  // outside the lock).
  bool MaybeWritesDoneLocked() TSA_REQUIRES(mu_) {
    if (!held_ || !half_closed_ || writing_ || writes_done_) return false;
    writes_done_ = true;
    StartWritesDone();
    held_ = false;
    return true;
  }

  // The server's initial metadata, once it is in (the port's call sends it before any message; posted under the
  // lock, so in order before a message another thread sends next).
  void SendInitialMetadataOnce() {
    RecursiveMutexLock g(&mu_);
    if (initial_sent_) return;
    initial_sent_ = true;
    call_->SendInitialMetadata(ToList(context_.GetServerInitialMetadata()));
  }

  const std::shared_ptr<H2Call> call_;
  OpenCount* const open_;
  grpc::ClientContext context_;
  grpc::ByteBuffer read_;
  std::shared_ptr<InProcessCall> self_;
  // Recursive: gRPC may run a reaction inline inside an operation started under it.
  RecursiveMutex mu_;
  // The front is being written while writing_ (deque: its elements stay put).
  std::deque<grpc::ByteBuffer> pending_ TSA_GUARDED_BY(mu_);
  bool held_ TSA_GUARDED_BY(mu_) = true;  // the hold taken at Start is kept
  bool writing_ TSA_GUARDED_BY(mu_) = false;
  bool half_closed_ TSA_GUARDED_BY(mu_) = false;
  bool writes_done_ TSA_GUARDED_BY(mu_) = false;
  bool initial_sent_ TSA_GUARDED_BY(mu_) = false;
};

}  // namespace

H2Dispatch MakeH2Dispatch(ServiceContext* ctx, grpc::GenericStub* in_process) {
  return [ctx, in_process](const std::shared_ptr<H2Call>& call) -> std::shared_ptr<H2Handler> {
    if (call->path() == kModelInferPath) return std::make_shared<NativeInfer>(ctx, call);
    auto relay = std::make_shared<InProcessCall>(call, &ctx->relays);
    relay->Start(in_process);
    return relay;
  };
}

}  // namespace inferd::grpcfe
