#include "frontends/grpc/grpc_forwarder.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_certificate_verifier.h>
#include <grpcpp/security/tls_credentials_options.h>

#include <algorithm>
#include <map>
#include <string_view>
#include <vector>

#include "core/mutex.h"
#include "frontends/grpc/byte_buffers.h"

namespace inferd::grpcfe {

namespace {

// The channels' credentials: plain, or TLS with the files watched by gRPC (a rotated certificate is taken up).
std::shared_ptr<grpc::ChannelCredentials> PeerCredentials(const GrpcForwarderOptions& o) {
  if (!o.tls.enabled) return grpc::InsecureChannelCredentials();
  namespace x = grpc::experimental;
  const unsigned refresh = std::max(1u, o.tls_refresh_secs);
  x::TlsChannelCredentialsOptions options;
  std::shared_ptr<x::CertificateProviderInterface> provider;
  if (!o.tls.cert_file.empty()) {
    provider =
        std::make_shared<x::FileWatcherCertificateProvider>(o.tls.key_file, o.tls.cert_file, o.tls.ca_file, refresh);
  } else if (!o.tls.ca_file.empty()) {
    provider = std::make_shared<x::FileWatcherCertificateProvider>(o.tls.ca_file, refresh);
  }
  if (provider) options.set_certificate_provider(provider);
  if (!o.tls.ca_file.empty()) options.watch_root_certs();  // else: the system's roots
  if (!o.tls.cert_file.empty()) options.watch_identity_key_cert_pairs();
  options.set_verify_server_certs(true);
  options.set_certificate_verifier(std::make_shared<x::HostNameCertificateVerifier>());
  return x::TlsCredentials(options);
}

}  // namespace

struct GrpcForwarder::Impl {
  GrpcForwarderOptions options;
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  Mutex mu;
  CondVar idle;
  std::map<std::string, std::shared_ptr<grpc::GenericStub>> stubs TSA_GUARDED_BY(mu);
  size_t in_flight TSA_GUARDED_BY(mu) = 0;

  // The stub for `address` (its channel is made on first use).
  std::shared_ptr<grpc::GenericStub> StubFor(const std::string& address) {
    MutexLock l(&mu);
    ++in_flight;
    auto& stub = stubs[address];
    if (!stub) {
      grpc::ChannelArguments args;
      args.SetMaxReceiveMessageSize(static_cast<int>(options.max_message_bytes));
      args.SetMaxSendMessageSize(static_cast<int>(options.max_message_bytes));
      const int connect_ms = static_cast<int>(options.connect_timeout.count());
      // A peer that cannot be reached fails a call within connect_timeout; a restarted one is tried again soon.
      args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, connect_ms);
      args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, connect_ms);
      args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, connect_ms);
      stub = std::make_shared<grpc::GenericStub>(grpc::CreateCustomChannel(address, credentials, args));
    }
    return stub;
  }
  void Release() {
    MutexLock l(&mu);
    if (--in_flight == 0) idle.NotifyAll();
  }
};

namespace {

// The forwarded request's bytes as a gRPC buffer, without a copy (the slice keeps the wire form alive).
grpc::ByteBuffer RequestBuffer(const std::shared_ptr<const WireRequest>& wire) {
  static const std::string kEmpty;
  const std::string& body = wire->body ? *wire->body : kEmpty;
  auto* keep = new std::shared_ptr<const WireRequest>(wire);
  grpc::Slice slice(
      const_cast<char*>(body.data()), body.size(),
      [](void* p) { delete static_cast<std::shared_ptr<const WireRequest>*>(p); }, keep);
  return grpc::ByteBuffer(&slice, 1);
}

void Prepare(grpc::ClientContext& ctx, const GrpcForwarderOptions& o, const WireRequest& wire,
             const std::string& from) {
  for (const auto& [key, value] : wire.headers) ctx.AddMetadata(key, value);
  ctx.AddMetadata("inferd-forwarded-by", from);
  // The client's deadline when it has one (DEADLINE_EXCEEDED is then relayed as the holder's answer: no other
  // copy is tried, the client has stopped waiting), within the forwarder's own bound.
  ctx.set_deadline(std::min(std::chrono::system_clock::now() + o.answer_timeout, wire.deadline));
}

// A call that ended without a response: UNAVAILABLE is the peer failing (the next copy is tried); anything
// else is the peer's answer.
void EndWithoutResponse(const grpc::Status& st, Forwarder::Events& events) {
  if (st.error_code() == grpc::StatusCode::UNAVAILABLE)
    return events.done(Status::Unavailable("the peer failed: " + st.error_message()));
  // No HTTP status (0): the code travels as grpc-status, which relay.cc reads back.
  events.head(
      0, {{"grpc-status", std::to_string(static_cast<int>(st.error_code()))}, {"grpc-message", st.error_message()}},
      /*streamed=*/false);
  events.done(Status::OK());
}

struct UnaryCall {
  grpc::ClientContext ctx;
  grpc::ByteBuffer request, response;
  Forwarder::Events events;
};

// One request of a ModelStreamInfer stream, on a stream of its own to the peer.
class StreamCall final : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  StreamCall(GrpcForwarder::Impl* impl, grpc::ByteBuffer request, Forwarder::Events events)
      : impl_(impl), request_(std::move(request)), events_(std::move(events)) {}
  grpc::ClientContext& ctx() { return ctx_; }

  void Start(grpc::GenericStub& stub, const std::string& method) {
    stub.PrepareBidiStreamingCall(&ctx_, method, grpc::StubOptions(), this);
    StartWriteLast(&request_, grpc::WriteOptions());
    StartRead(&incoming_);
    StartCall();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // the stream ended: OnDone says how
    if (!head_) {
      head_ = true;
      events_.head(200, {}, /*streamed=*/true);
    }
    if (!events_.body(BytesOf(incoming_))) {
      stopped_ = true;  // the client went away: end the peer's stream too
      ctx_.TryCancel();
      return;
    }
    StartRead(&incoming_);
  }

  void OnDone(const grpc::Status& st) override {
    if (stopped_) {
      events_.done(Status::Cancelled("the client went away"));
    } else if (head_) {
      events_.done(st.ok() ? Status::OK() : Status::Unavailable("the peer's stream broke off: " + st.error_message()));
    } else if (st.ok()) {
      events_.head(200, {}, /*streamed=*/true);  // the peer answered nothing (a decoupled model may)
      events_.done(Status::OK());
    } else {
      EndWithoutResponse(st, events_);
    }
    GrpcForwarder::Impl* impl = impl_;
    delete this;
    impl->Release();
  }

 private:
  GrpcForwarder::Impl* const impl_;
  grpc::ClientContext ctx_;
  grpc::ByteBuffer request_, incoming_;
  Forwarder::Events events_;
  bool head_ = false, stopped_ = false;  // the reactions run one at a time
};

}  // namespace

GrpcForwarder::GrpcForwarder(GrpcForwarderOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->options = options;
  impl_->credentials = PeerCredentials(impl_->options);
}

GrpcForwarder::~GrpcForwarder() { Stop(); }

void GrpcForwarder::Stop() {
  MutexLock l(&impl_->mu);
  while (impl_->in_flight > 0) impl_->idle.Wait(&impl_->mu);
  impl_->stubs.clear();
}

void GrpcForwarder::Forward(const std::string& address, std::shared_ptr<const WireRequest> request,
                            const std::string& from_node, Events events) {
  std::shared_ptr<grpc::GenericStub> stub = impl_->StubFor(address);
  if (request->target == kModelStreamInferMethod) {
    auto* call = new StreamCall(impl_.get(), RequestBuffer(request), std::move(events));
    Prepare(call->ctx(), impl_->options, *request, from_node);
    call->Start(*stub, request->target);
    return;
  }
  auto* call = new UnaryCall;
  call->request = RequestBuffer(request);
  call->events = std::move(events);
  Prepare(call->ctx, impl_->options, *request, from_node);
  Impl* impl = impl_.get();
  stub->UnaryCall(&call->ctx, request->target, grpc::StubOptions(), &call->request, &call->response,
                  [call, impl](grpc::Status st) {
                    if (st.ok()) {
                      call->events.head(200, {}, /*streamed=*/false);
                      call->events.body(BytesOf(call->response));
                      call->events.done(Status::OK());
                    } else {
                      EndWithoutResponse(st, call->events);
                    }
                    delete call;
                    impl->Release();
                  });
}

}  // namespace inferd::grpcfe
