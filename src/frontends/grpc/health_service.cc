// grpc.health.v1.Health over the server's readiness.
#include "frontends/grpc/services.h"
#include "server/inference_server.h"

namespace inferd::grpcfe {
namespace {

using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

bool KnownService(const std::string& s) { return s.empty() || s == "inference.GRPCInferenceService"; }

HealthCheckResponse::ServingStatus Current(const ServiceContext& ctx) {
  return !ctx.stopping.load() && ctx.server->IsReady() ? HealthCheckResponse::SERVING
                                                       : HealthCheckResponse::NOT_SERVING;
}

// Watch: sends the current status at once and NOT_SERVING when the server
// begins to shut down, then ends. (Readiness changes between the two, such as
// a model failing under --strict-readiness, are reported by Check.)
class WatchReactor final : public grpc::ServerWriteReactor<HealthCheckResponse>, public Drainable {
 public:
  WatchReactor(ServiceContext* ctx, const std::string& service) : ctx_(ctx) {
    first_.set_status(KnownService(service) ? Current(*ctx) : HealthCheckResponse::SERVICE_UNKNOWN);
    last_.set_status(HealthCheckResponse::NOT_SERVING);
    // Until this constructor returns the call is not bound: operations
    // started here (or by a concurrent Drain) are queued by gRPC, in order.
    writing_ = true;
    if (!ctx_->drains.Add(this)) {
      finished_ = true;
      StartWriteAndFinish(&last_, grpc::WriteOptions(), grpc::Status::OK);
      return;
    }
    StartWrite(&first_);
  }

  void OnWriteDone(bool ok) override {
    bool last = false, finish = false;
    {
      MutexLock g(&mu_);
      writing_ = false;
      if (finished_) return;
      if (!ok || cancelled_) {
        finished_ = finish = true;
      } else if (draining_) {
        finished_ = last = true;
      }
    }
    if (last) StartWriteAndFinish(&last_, grpc::WriteOptions(), grpc::Status::OK);
    if (finish) Finish(grpc::Status::CANCELLED);
  }

  void OnCancel() override {
    bool finish;
    {
      MutexLock g(&mu_);
      cancelled_ = true;
      finish = !writing_ && !finished_;
      if (finish) finished_ = true;
    }
    if (finish) Finish(grpc::Status::CANCELLED);
  }

  void Drain() override {
    bool last;
    {
      MutexLock g(&mu_);
      draining_ = true;
      last = !writing_ && !finished_;
      if (last) finished_ = true;
    }
    if (last) StartWriteAndFinish(&last_, grpc::WriteOptions(), grpc::Status::OK);
  }

  void OnDone() override {
    ctx_->drains.Remove(this);
    delete this;
  }

 private:
  ServiceContext* ctx_;
  HealthCheckResponse first_, last_;
  Mutex mu_;
  bool writing_ TSA_GUARDED_BY(mu_) = false;
  bool draining_ TSA_GUARDED_BY(mu_) = false;
  bool cancelled_ TSA_GUARDED_BY(mu_) = false;
  bool finished_ TSA_GUARDED_BY(mu_) = false;
};

}  // namespace

grpc::ServerUnaryReactor* HealthService::Check(grpc::CallbackServerContext* c, const HealthCheckRequest* req,
                                               HealthCheckResponse* resp) {
  auto* reactor = c->DefaultReactor();
  if (Status st = AuthorizeCall(*ctx_, c, auth::Need::kHealth); !st.ok()) {
    reactor->Finish(ToGrpcStatus(st));
    return reactor;
  }
  if (!KnownService(req->service())) {
    reactor->Finish(grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown service '" + req->service() + "'"));
    return reactor;
  }
  resp->set_status(Current(*ctx_));
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerWriteReactor<HealthCheckResponse>* HealthService::Watch(grpc::CallbackServerContext* c,
                                                                    const HealthCheckRequest* req) {
  if (Status st = AuthorizeCall(*ctx_, c, auth::Need::kHealth); !st.ok()) {
    return new RefusedStream<grpc::ServerWriteReactor<HealthCheckResponse>>(st);
  }
  return new WatchReactor(ctx_, req->service());
}

}  // namespace inferd::grpcfe
