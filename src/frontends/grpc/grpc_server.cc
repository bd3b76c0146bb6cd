#include "frontends/grpc/grpc_server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "auth/pem_files.h"
#include "frontends/grpc/h2_handlers.h"
#include "frontends/grpc/h2_port.h"
#include "frontends/grpc/services.h"
#include "server/inference_server.h"

namespace inferd::grpcfe {

grpc::Status ToGrpcStatus(const Status& st) {
  grpc::StatusCode code = grpc::StatusCode::UNKNOWN;
  switch (st.code()) {
    case StatusCode::kOk:
      return grpc::Status::OK;
    case StatusCode::kInvalidArgument:
      code = grpc::StatusCode::INVALID_ARGUMENT;
      break;
    case StatusCode::kNotFound:
      code = grpc::StatusCode::NOT_FOUND;
      break;
    case StatusCode::kUnavailable:
      code = grpc::StatusCode::UNAVAILABLE;
      break;
    case StatusCode::kInternal:
      code = grpc::StatusCode::INTERNAL;
      break;
    case StatusCode::kUnimplemented:
      code = grpc::StatusCode::UNIMPLEMENTED;
      break;
    case StatusCode::kDeadlineExceeded:
      code = grpc::StatusCode::DEADLINE_EXCEEDED;
      break;
    case StatusCode::kFailedPrecondition:
      code = grpc::StatusCode::FAILED_PRECONDITION;
      break;
    case StatusCode::kResourceExhausted:
      code = grpc::StatusCode::RESOURCE_EXHAUSTED;
      break;
    case StatusCode::kAlreadyExists:
      code = grpc::StatusCode::ALREADY_EXISTS;
      break;
    case StatusCode::kCancelled:
      code = grpc::StatusCode::CANCELLED;
      break;
    case StatusCode::kUnauthenticated:
      code = grpc::StatusCode::UNAUTHENTICATED;
      break;
    case StatusCode::kPermissionDenied:
      code = grpc::StatusCode::PERMISSION_DENIED;
      break;
    case StatusCode::kRateLimited:
      code = grpc::StatusCode::RESOURCE_EXHAUSTED;
      break;
  }
  return grpc::Status(code, st.message());
}

// The port's credentials: plain, or TLS from the files (gRPC re-reads them when they change).
static Result<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials(const GrpcTlsOptions& tls) {
  if (!tls.enabled()) return grpc::InsecureServerCredentials();
  // Checked here so that a bad file stops the start; gRPC's watcher would only fail the handshakes.
  if (Status st = auth::CheckCertificateAndKey(tls.cert_file, tls.key_file); !st.ok()) return st;
  if (tls.mutual) {
    if (tls.client_ca_file.empty()) return Status::InvalidArgument("mutual TLS on gRPC needs a client CA file");
    if (Status st = auth::CheckCaFile(tls.client_ca_file); !st.ok()) return st;
  }
  auto provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      tls.key_file, tls.cert_file, tls.mutual ? tls.client_ca_file : std::string(), std::max(1u, tls.refresh_secs));
  grpc::experimental::TlsServerCredentialsOptions options(provider);
  options.watch_identity_key_cert_pairs();
  if (tls.mutual) {
    options.watch_root_certs();
    options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  } else {
    options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  }
  return grpc::experimental::TlsServerCredentials(options);
}

Status AuthorizeCall(const ServiceContext& ctx, const CallView& c, auth::Need need, std::string_view model) {
  return ctx.server->front_end().access->Check(c.Metadata("authorization"), need, model);
}

std::string_view LibraryCall::Metadata(std::string_view key) const {
  const auto& md = c_->client_metadata();
  auto it = md.find(grpc::string_ref(key.data(), key.size()));
  return it == md.end() ? std::string_view() : std::string_view(it->second.data(), it->second.size());
}

void LibraryCall::ForEachMetadata(const std::function<void(std::string_view, std::string_view)>& f) const {
  for (const auto& [key, value] : c_->client_metadata())
    f(std::string_view(key.data(), key.size()), std::string_view(value.data(), value.size()));
}

// "ipv4:127.0.0.1:5000" -> "127.0.0.1:5000"; "ipv6:[::1]:5000" -> "[::1]:5000". A call the HTTP/2 port
// handed over in the process carries its client's address in metadata.
std::string LibraryCall::Peer() const {
  std::string peer = c_->peer();
  for (std::string_view prefix : {"ipv4:", "ipv6:"}) {
    if (peer.compare(0, prefix.size(), prefix) == 0) return peer.substr(prefix.size());
  }
  if (std::string_view client = Metadata(kClientAddressMetadata); !client.empty()) return std::string(client);
  return peer;
}

bool DrainRegistry::Add(Drainable* d) {
  RecursiveMutexLock g(&mu_);
  if (draining_) return false;
  open_.insert(d);
  return true;
}

void DrainRegistry::Remove(Drainable* d) {
  RecursiveMutexLock g(&mu_);
  open_.erase(d);
}

void DrainRegistry::DrainAll() {
  // Held throughout: the OnDone (which Removes, then deletes) of a call
  // drained here waits on another thread, so no call is deleted before its
  // turn. gRPC may also run a call's OnDone inline, inside the Finish its
  // Drain makes, on this thread: hence the recursive mutex and the snapshot
  // (that call is never touched again).
  RecursiveMutexLock g(&mu_);
  draining_ = true;
  const std::vector<Drainable*> open(open_.begin(), open_.end());
  for (Drainable* d : open) d->Drain();
}

struct GrpcServer::Impl {
  GrpcServerOptions options;
  ServiceContext ctx;
  InferenceService inference{&ctx};
  HealthService health{&ctx};
  ManagementService management{&ctx};
  std::unique_ptr<grpc::Server> server;
  int port = 0;
  bool stop_begun = false;
  std::thread shutdown_thread;
  std::chrono::steady_clock::time_point stop_deadline;
  // With own_http2 on a plain port: the port, and the way to gRPC's server behind it.
  std::unique_ptr<grpc::GenericStub> in_process;
  std::unique_ptr<H2Port> h2;
};

GrpcServer::GrpcServer(GrpcServerOptions options, InferenceServer* server) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
  impl_->ctx.server = server;
  impl_->ctx.observer = impl_->options.observer;
  impl_->ctx.max_stream_in_flight = std::max<size_t>(1, impl_->options.max_stream_in_flight);
}

GrpcServer::~GrpcServer() { Stop(std::chrono::milliseconds(0)); }

Status GrpcServer::Start() {
  const GrpcServerOptions& o = impl_->options;
  const std::string address =
      (o.host.find(':') != std::string::npos ? "[" + o.host + "]" : o.host) + ":" + std::to_string(o.port);
  // Server reflection (grpcurl, grpc_cli). Linking the plugin library
  // registers it for every server anyway; the call keeps the link explicit.
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  auto credentials = ServerCredentials(o.tls);
  if (!credentials.ok()) return credentials.status();
  const bool own = o.own_http2 && !o.tls.enabled();
  grpc::ServerBuilder b;
  if (!own) b.AddListeningPort(address, *credentials, &impl_->port);
  b.RegisterService(&impl_->inference);
  b.RegisterService(&impl_->health);
  b.RegisterService(&impl_->management);
  const int max_msg = static_cast<int>(std::min<size_t>(o.max_message_bytes, INT32_MAX));
  b.SetMaxReceiveMessageSize(max_msg);
  b.SetMaxSendMessageSize(max_msg);
  // gRPC sets SO_REUSEPORT by default: a second server on the same port would
  // then start and silently take half the connections. Fail instead, as HTTP does.
  b.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  b.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, o.keepalive_time_ms);
  b.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, o.keepalive_timeout_ms);
  b.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, o.keepalive_permit_without_calls ? 1 : 0);
  b.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, o.http2_max_pings_without_data);
  b.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                       o.http2_min_recv_ping_interval_without_data_ms);
  b.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, o.http2_max_ping_strikes);
  if (o.max_concurrent_streams > 0) b.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, o.max_concurrent_streams);
  impl_->server = b.BuildAndStart();
  if (!impl_->server || (!own && impl_->port == 0)) {
    impl_->server.reset();
    return Status::Unavailable("gRPC: cannot listen on " + address);
  }
  if (!own) return Status::OK();
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);  // the port enforces --grpc-max-message-bytes
  args.SetMaxSendMessageSize(-1);
  impl_->in_process = std::make_unique<grpc::GenericStub>(impl_->server->InProcessChannel(args));
  H2PortOptions ho;
  ho.host = o.host;
  ho.port = o.port;
  ho.threads = o.io_threads;
  ho.max_message_bytes = o.max_message_bytes;
  ho.max_concurrent_streams = o.max_concurrent_streams;
  ho.keepalive_time = std::chrono::milliseconds(o.keepalive_time_ms);
  ho.keepalive_timeout = std::chrono::milliseconds(o.keepalive_timeout_ms);
  ho.keepalive_permit_without_calls = o.keepalive_permit_without_calls;
  ho.max_pings_without_data = o.http2_max_pings_without_data;
  ho.min_recv_ping_interval = std::chrono::milliseconds(o.http2_min_recv_ping_interval_without_data_ms);
  ho.max_ping_strikes = o.http2_max_ping_strikes;
  impl_->h2 = std::make_unique<H2Port>(ho, MakeH2Dispatch(&impl_->ctx, impl_->in_process.get()));
  if (Status st = impl_->h2->Start(); !st.ok()) {
    impl_->h2.reset();
    impl_->server->Shutdown();
    impl_->server.reset();
    return st;
  }
  impl_->port = impl_->h2->port();
  return Status::OK();
}

uint16_t GrpcServer::port() const { return static_cast<uint16_t>(impl_->port); }

std::string GrpcServer::transport() const { return impl_->h2 ? "inferd's HTTP/2" : "gRPC's server"; }

void GrpcServer::StopAccepting(std::chrono::milliseconds grace) {
  if (!impl_->server || impl_->stop_begun) return;
  impl_->stop_begun = true;
  impl_->ctx.stopping = true;
  impl_->ctx.drains.DrainAll();
  impl_->stop_deadline = std::chrono::steady_clock::now() + grace;
  if (impl_->h2) {
    // A GOAWAY on every connection: their open calls go on, new ones are refused. gRPC's server behind the
    // port stops in Stop, once the calls relayed to it have ended (its in-process transport would cut them).
    impl_->h2->StopAccepting();
    return;
  }
  const auto deadline = std::chrono::system_clock::now() + grace;
  // Shutdown blocks until every call has finished (unary calls when the
  // server answers them); calls still open after `grace` are cancelled.
  impl_->shutdown_thread = std::thread([this, deadline] { impl_->server->Shutdown(deadline); });
}

void GrpcServer::Stop(std::chrono::milliseconds grace) {
  if (!impl_->server) return;
  StopAccepting(grace);
  if (impl_->shutdown_thread.joinable()) impl_->shutdown_thread.join();
  if (impl_->h2) {
    impl_->h2->WaitForCalls(impl_->stop_deadline);
    // What is still open at the deadline is cancelled; the ends of relayed calls still go out (bounded).
    impl_->server->Shutdown(std::chrono::system_clock::now());
    const auto soon = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    if (!impl_->ctx.relays.WaitForNone(soon)) spdlog::warn("gRPC: relayed calls still open at the stop");
    impl_->h2->WaitForCalls(std::min(soon, std::chrono::steady_clock::now() + std::chrono::seconds(1)));
    impl_->h2->Stop();
  }
  impl_->server.reset();
}

}  // namespace inferd::grpcfe
