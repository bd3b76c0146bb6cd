// Internal to the gRPC front end: the callback services and what they share.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "auth/access_policy.h"
#include "core/infer_request.h"
#include "core/mutex.h"
#include "core/status.h"
#include "grpc_service.grpc.pb.h"
#include "health.grpc.pb.h"
#include "inferd_management.grpc.pb.h"
#include "tracing/request_observer.h"

namespace inferd {
class InferenceServer;
}

namespace inferd::grpcfe {

// The gRPC status for a facade Status (the same codes HTTP maps to 4xx/5xx).
grpc::Status ToGrpcStatus(const Status& st);

// A long-lived call (a stream) that must end itself when the server stops.
class Drainable {
 public:
  virtual ~Drainable() = default;
  // Finish once what was accepted is answered. Called once, under the
  // registry's lock: must not block; the call may be deleted before it
  // returns (gRPC can run OnDone inline).
  virtual void Drain() = 0;
};

// Open streams, so a shutdown can drain them. Thread-safe.
class DrainRegistry {
 public:
  // False when draining has begun: the caller must end itself.
  bool Add(Drainable* d);
  void Remove(Drainable* d);
  void DrainAll();

 private:
  RecursiveMutex mu_;
  std::set<Drainable*> open_ TSA_GUARDED_BY(mu_);
  bool draining_ TSA_GUARDED_BY(mu_) = false;
};

struct ServiceContext;

// How many of something are open, and a bounded wait for none. Thread-safe.
class OpenCount {
 public:
  void Add() {
    MutexLock g(&mu_);
    ++n_;
  }
  void Done() {
    bool none;
    {
      MutexLock g(&mu_);
      none = --n_ == 0;
    }
    if (none) cv_.NotifyAll();
  }
  // True when none is open (at once, or before `deadline`).
  bool WaitForNone(std::chrono::steady_clock::time_point deadline) {
    MutexLock g(&mu_);
    while (n_ > 0) {
      const auto now = std::chrono::steady_clock::now();
      if (now >= deadline) return false;
      cv_.WaitForReal(&mu_, deadline - now);
    }
    return true;
  }

 private:
  Mutex mu_;
  CondVar cv_;
  int64_t n_ TSA_GUARDED_BY(mu_) = 0;
};

// What a service reads of a call and adds to its answer, whichever server
// carries it: gRPC's own (LibraryCall) or inferd's HTTP/2 port (h2_port.h).
// Used by the thread serving the call, until it is answered.
class CallView {
 public:
  virtual ~CallView() = default;
  // The value of metadata `key` (lower case); "" when absent.
  virtual std::string_view Metadata(std::string_view key) const = 0;
  // Every metadata entry as the client sent it.
  virtual void ForEachMetadata(const std::function<void(std::string_view, std::string_view)>& f) const = 0;
  // The client's address: "127.0.0.1:5000", "[::1]:5000".
  virtual std::string Peer() const = 0;
  // When the client stops waiting (time_point::max(): never).
  virtual std::chrono::system_clock::time_point Deadline() const = 0;
  // Adds to the answer's initial metadata (before it is sent).
  virtual void AddInitialMetadata(const std::string& key, const std::string& value) = 0;
};

// Metadata the HTTP/2 port adds to a call it hands to gRPC's server in the
// process (h2_port.h): the client's address. Never taken from a client.
inline constexpr std::string_view kClientAddressMetadata = "inferd-client-address";

// A call of gRPC's server. Not owned.
class LibraryCall final : public CallView {
 public:
  explicit LibraryCall(grpc::CallbackServerContext* c) : c_(c) {}
  std::string_view Metadata(std::string_view key) const override;
  void ForEachMetadata(const std::function<void(std::string_view, std::string_view)>& f) const override;
  std::string Peer() const override;
  std::chrono::system_clock::time_point Deadline() const override { return c_->deadline(); }
  void AddInitialMetadata(const std::string& key, const std::string& value) override {
    c_->AddInitialMetadata(key, value);
  }

 private:
  grpc::CallbackServerContext* const c_;
};

// The call's `authorization` metadata checked by the server's access policy
// for a route that needs `need`, naming `model` ("" none): auth/access_policy.h.
Status AuthorizeCall(const ServiceContext& ctx, const CallView& c, auth::Need need, std::string_view model = {});
inline Status AuthorizeCall(const ServiceContext& ctx, grpc::CallbackServerContext* c, auth::Need need,
                            std::string_view model = {}) {
  return AuthorizeCall(ctx, LibraryCall(c), need, model);
}

// A streaming call refused before it starts (e.g. UNAUTHENTICATED).
template <typename Base>
class RefusedStream final : public Base {
 public:
  explicit RefusedStream(const Status& st) { this->Finish(ToGrpcStatus(st)); }
  void OnDone() override { delete this; }
};

// Cluster mode (relay.cc): the wire form of a request that came over gRPC
// as a call of `method` (kModelInferMethod, kModelStreamInferMethod for one
// request of a stream, or another method of the inference service), for the
// forward stage. Null when the server is not clustered, or when a peer
// forwarded it here (`forwarded_by` set, when given: served here, never
// forwarded again). Call before the request is decoded (decoding moves its
// buffers out).
std::shared_ptr<const WireRequest> GrpcWireForm(const ServiceContext& ctx, const CallView& c,
                                                const google::protobuf::Message& req, const char* method,
                                                std::string* forwarded_by);
// The status a relayed answer carries when the peer's call failed.
std::optional<grpc::Status> RelayedFailure(const RelayedAnswer& a);
// A relayed unary answer into `response` (and the serving node into the
// call's initial metadata, inferd-served-by); the status to finish with.
grpc::Status RelayUnary(const RelayedAnswer& a, CallView* c, google::protobuf::Message* response);
// A unary call about one model that is not an inference (ModelMetadata,
// ModelConfig, ModelStatistics): `here` answers it on this node, or, in
// cluster mode, the node that holds `model` does and its answer is relayed
// into `response` (InferenceServer::RouteModelRead). `here` (after the
// model's load with `wait_for_load`; a failed load finishes the call for it)
// finishes the reactor itself.
void RouteModelRead(const ServiceContext& ctx, grpc::CallbackServerContext* c, grpc::ServerUnaryReactor* reactor,
                    const google::protobuf::Message& request, const char* method, const std::string& model,
                    bool wait_for_load, google::protobuf::Message* response, std::function<void()> here);

// Tracing and the access log for one ModelInfer call or one request of a
// stream (observe.cc); null when neither is on (ServiceContext::observer).
struct ObservedCall {
  const tracing::RequestObserver* observer = nullptr;
  tracing::ObservedRequest request;  // its root span, when traced
  tracing::AccessRecord record;
};
// `request` (may be null) gives the bytes in, when the access log is on.
std::shared_ptr<ObservedCall> ObserveCall(const ServiceContext& ctx, const CallView& c, const char* method,
                                          const google::protobuf::Message* request, std::string model,
                                          std::string version, std::string id);
// The call was answered with `status`: ends the span, writes the line. `unary`
// (null for a stream's request): the call, whose initial metadata gets the
// traceparent of the span (call before Finish).
void FinishObserved(ObservedCall& o, CallView* unary, const grpc::Status& status,
                    const google::protobuf::Message* response, const std::string& served_version);

// The call's sticky key for traffic splits (metadata inferd-sticky-key).
std::string StickyKeyOf(const CallView& c);

// One ModelInfer call, whichever server carries it: authorized, observed,
// decoded (the raw input buffers moved out of `request`) and handed to the
// server. `finish` is called once, inline on an early error or later on a
// model worker, after `response` is filled; `call`, `request` and `response`
// must live until then. `cancellation` is the request's.
void ServeModelInfer(ServiceContext& ctx, CallView& call, inference::ModelInferRequest& request,
                     inference::ModelInferResponse* response, std::shared_ptr<Cancellation> cancellation,
                     std::function<void(const grpc::Status&)> finish);

struct ServiceContext {
  InferenceServer* server = nullptr;
  const tracing::RequestObserver* observer = nullptr;  // GrpcServerOptions::observer
  size_t max_stream_in_flight = 1024;
  std::atomic<bool> stopping{false};
  DrainRegistry drains;
  // Calls the HTTP/2 port relayed to gRPC's server in the process whose client side has not ended
  // (h2_handlers.cc); the port is torn down only after them.
  OpenCount relays;
};

class InferenceService final : public inference::GRPCInferenceService::CallbackService {
 public:
  explicit InferenceService(ServiceContext* ctx) : ctx_(ctx) {}

  grpc::ServerUnaryReactor* ServerLive(grpc::CallbackServerContext* c, const inference::ServerLiveRequest* req,
                                       inference::ServerLiveResponse* resp) override;
  grpc::ServerUnaryReactor* ServerReady(grpc::CallbackServerContext* c, const inference::ServerReadyRequest* req,
                                        inference::ServerReadyResponse* resp) override;
  grpc::ServerUnaryReactor* ModelReady(grpc::CallbackServerContext* c, const inference::ModelReadyRequest* req,
                                       inference::ModelReadyResponse* resp) override;
  grpc::ServerUnaryReactor* ServerMetadata(grpc::CallbackServerContext* c, const inference::ServerMetadataRequest* req,
                                           inference::ServerMetadataResponse* resp) override;
  grpc::ServerUnaryReactor* ModelMetadata(grpc::CallbackServerContext* c, const inference::ModelMetadataRequest* req,
                                          inference::ModelMetadataResponse* resp) override;
  grpc::ServerUnaryReactor* ModelInfer(grpc::CallbackServerContext* c, const inference::ModelInferRequest* req,
                                       inference::ModelInferResponse* resp) override;
  grpc::ServerBidiReactor<inference::ModelInferRequest, inference::ModelStreamInferResponse>* ModelStreamInfer(
      grpc::CallbackServerContext* c) override;
  grpc::ServerUnaryReactor* ModelConfig(grpc::CallbackServerContext* c, const inference::ModelConfigRequest* req,
                                        inference::ModelConfigResponse* resp) override;
  grpc::ServerUnaryReactor* ModelStatistics(grpc::CallbackServerContext* c,
                                            const inference::ModelStatisticsRequest* req,
                                            inference::ModelStatisticsResponse* resp) override;
  grpc::ServerUnaryReactor* RepositoryIndex(grpc::CallbackServerContext* c,
                                            const inference::RepositoryIndexRequest* req,
                                            inference::RepositoryIndexResponse* resp) override;
  grpc::ServerUnaryReactor* RepositoryModelLoad(grpc::CallbackServerContext* c,
                                                const inference::RepositoryModelLoadRequest* req,
                                                inference::RepositoryModelLoadResponse* resp) override;
  grpc::ServerUnaryReactor* RepositoryModelUnload(grpc::CallbackServerContext* c,
                                                  const inference::RepositoryModelUnloadRequest* req,
                                                  inference::RepositoryModelUnloadResponse* resp) override;

 private:
  ServiceContext* ctx_;
};

// grpc.health.v1.Health: SERVING while the server is ready (the service ""
// and "inference.GRPCInferenceService"), NOT_SERVING otherwise and from the
// start of a shutdown.
class HealthService final : public grpc::health::v1::Health::CallbackService {
 public:
  explicit HealthService(ServiceContext* ctx) : ctx_(ctx) {}
  grpc::ServerUnaryReactor* Check(grpc::CallbackServerContext* c, const grpc::health::v1::HealthCheckRequest* req,
                                  grpc::health::v1::HealthCheckResponse* resp) override;
  grpc::ServerWriteReactor<grpc::health::v1::HealthCheckResponse>* Watch(
      grpc::CallbackServerContext* c, const grpc::health::v1::HealthCheckRequest* req) override;

 private:
  ServiceContext* ctx_;
};

// inferd.management.ManagementService (proto/inferd_management.proto):
// traffic policies and rollouts; the JSON documents of the HTTP routes.
// Calls that change state run on the server's admin thread.
class ManagementService final : public inferd::management::ManagementService::CallbackService {
 public:
  explicit ManagementService(ServiceContext* ctx) : ctx_(ctx) {}
  using ModelRequest = inferd::management::ModelRequest;
  using JsonRequest = inferd::management::JsonRequest;
  using JsonAnswer = inferd::management::JsonAnswer;

  grpc::ServerUnaryReactor* GetTraffic(grpc::CallbackServerContext* c, const ModelRequest* req,
                                       JsonAnswer* resp) override;
  grpc::ServerUnaryReactor* SetTraffic(grpc::CallbackServerContext* c, const JsonRequest* req,
                                       JsonAnswer* resp) override;
  grpc::ServerUnaryReactor* ClearTraffic(grpc::CallbackServerContext* c, const ModelRequest* req,
                                         JsonAnswer* resp) override;
  grpc::ServerUnaryReactor* StartRollout(grpc::CallbackServerContext* c, const JsonRequest* req,
                                         JsonAnswer* resp) override;
  grpc::ServerUnaryReactor* GetRollout(grpc::CallbackServerContext* c, const ModelRequest* req,
                                       JsonAnswer* resp) override;
  grpc::ServerUnaryReactor* AbortRollout(grpc::CallbackServerContext* c, const ModelRequest* req,
                                         JsonAnswer* resp) override;

 private:
  ServiceContext* ctx_;
};

}  // namespace inferd::grpcfe
