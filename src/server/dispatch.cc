// InferenceServer's request path: resolve the request once into a pinned
// version and run it through the request pipeline (server/pipeline/); under
// on-demand residency, wait (bounded) for a model that is not resident to
// load first.
#include "manager/model_manager.h"
#include "routing/routing_policy.h"
#include "server/cluster_service.h"
#include "server/forward_call.h"
#include "server/inference_server.h"
#include "server/pipeline/stages.h"
#include "server/request_validation.h"
#include "server/server_options.h"

namespace inferd {

void InferenceServer::InferAsync(std::unique_ptr<InferRequest> request, InferCallback callback) {
  Dispatch(std::move(request), ResponseSink{nullptr, std::move(callback)}, clock_->Now(), /*may_wait=*/true);
}

void InferenceServer::InferAsync(std::unique_ptr<InferRequest> request, ResponseSink sink) {
  Dispatch(std::move(request), std::move(sink), clock_->Now(), /*may_wait=*/true);
}

Status InferenceServer::Admit(const std::string& name, const std::string& version) const {
  // Under a traffic split the version that serves depends on the request (a
  // sticky parameter, a draw): the pipeline's admission stage checks the
  // pinned one. Here only what is known before the request is read.
  if (version.empty()) {
    auto serving = manager_->Serving(name);
    if (!serving || serving->traffic) return Status::OK();
  }
  auto mv = FindVersion(name, version);
  if (!mv.ok()) return Status::OK();
  Status st = (*mv)->scheduler().Admission();
  if (!st.ok()) (*mv)->stats()->RecordFailure(FailureReason::kRejected, 0);
  return st;
}

bool InferenceServer::CanWaitForLoad(const Status& lookup) const {
  return manager_->on_demand() && lookup.code() == StatusCode::kUnavailable && !shutting_down_.load();
}

void InferenceServer::WaitForLoad(std::unique_ptr<InferRequest> request, ResponseSink sink, TimePoint arrival) {
  if (Status st = ApplySchedulingParameters(request.get()); !st.ok()) return sink.final(st);
  Duration wait = options_->load_wait;
  if (request->timeout_us > 0) wait = std::min<Duration>(wait, std::chrono::microseconds(request->timeout_us));
  const std::string name = request->model_name;
  manager_->LoadInBackground(name, OnDemandLoader::Waiter{std::move(request), std::move(sink.final),
                                                          std::move(sink.partial), arrival, arrival + wait,
                                                          /*resident=*/nullptr});
}

void InferenceServer::WhenResident(const std::string& name, std::function<void(const Status&)> then) {
  // Eager residency (the common case): nothing to wait for, and no second lookup on the request path.
  if (!manager_->on_demand()) return then(Status::OK());
  auto serving = FindVersion(name, "");
  if (serving.ok() || !CanWaitForLoad(serving.status())) return then(Status::OK());
  OnDemandLoader::Waiter w;
  w.request = std::make_unique<InferRequest>();
  w.request->model_name = name;
  w.arrival = clock_->Now();
  w.deadline = w.arrival + options_->load_wait;
  w.resident = std::move(then);
  manager_->LoadInBackground(name, std::move(w));
}

void InferenceServer::RouteModelRead(const std::string& name, std::shared_ptr<const WireRequest> wire,
                                     bool wait_for_load, std::function<void(const Status&)> here,
                                     InferCallback relayed) {
  auto serve_here = [this, name, wait_for_load, here = std::move(here)] {
    if (wait_for_load) return WhenResident(name, here);
    here(Status::OK());
  };
  if (!wire || !cluster_ || options_->forwarder == nullptr) return serve_here();
  ClusterService::Route route = cluster_->RouteModel(name);
  if (route.local) return serve_here();
  ForwardToCopies({cluster_.get(), options_->forwarder, clock_}, name, std::move(wire), std::move(route.targets),
                  ResponseSink{nullptr, std::move(relayed)},
                  [serve_here = std::move(serve_here)](ResponseSink) { serve_here(); });
}

void InferenceServer::OnLoadDone(OnDemandLoader::Waiter w, const Status& st) {
  if (w.resident) {
    if (st.code() == StatusCode::kDeadlineExceeded) {
      manager_->mutable_metrics().cold_start_timeouts.fetch_add(1, std::memory_order_relaxed);
    }
    const bool keep = st.ok() || st.code() == StatusCode::kDeadlineExceeded || st.code() == StatusCode::kUnavailable;
    return w.resident(keep ? st : Status::Unavailable(st.message()));
  }
  if (st.ok()) {
    return Dispatch(std::move(w.request), ResponseSink{std::move(w.partial), std::move(w.callback)}, w.arrival,
                    /*may_wait=*/false);
  }
  if (st.code() == StatusCode::kDeadlineExceeded) {
    manager_->mutable_metrics().cold_start_timeouts.fetch_add(1, std::memory_order_relaxed);
  }
  // A broken model is the server's problem, not a bad request: 503.
  const bool keep = st.code() == StatusCode::kDeadlineExceeded || st.code() == StatusCode::kUnavailable;
  w.callback(keep ? st : Status::Unavailable(st.message()));
}

void InferenceServer::Dispatch(std::unique_ptr<InferRequest> request, ResponseSink sink, TimePoint arrival,
                               bool may_wait) {
  if (shutting_down_.load()) return sink.final(Status::Unavailable("the server is shutting down"));
  auto ctx = std::make_unique<RequestContext>();
  ctx->request = std::move(request);
  ctx->sink = std::move(sink);
  ctx->arrival = arrival;
  ctx->may_wait = may_wait;
  routing_pipeline_->Run(std::move(ctx));  // forward (cluster mode), then Resolve
}

void InferenceServer::Resolve(std::unique_ptr<RequestContext> ctx) {
  // Resolved once: the pinned version serves the request through every stage.
  std::shared_ptr<ModelVersion> shadow;
  InferRequest& request = *ctx->request;
  auto mv = FindVersion(request.model_name, request.model_version, &request, &shadow);
  if (!mv.ok()) {
    if (ctx->may_wait && CanWaitForLoad(mv.status()))
      return WaitForLoad(std::move(ctx->request), std::move(ctx->sink), ctx->arrival);
    return ctx->sink.final(mv.status());
  }
  (*mv)->Touch(ctx->arrival);
  ctx->asked_default = request.model_version.empty();
  request.model_version = (*mv)->version_string();
  ctx->handle = ServingHandle{std::move(*mv), std::move(shadow)};
  pipeline_->Run(std::move(ctx));
}

Rerouter InferenceServer::MakeRerouter() {
  Rerouter r;
  r.find = [this](const InferRequest& request, bool asked_default) {
    return FindVersion(request.model_name, asked_default ? "" : request.model_version, &request);
  };
  r.can_wait = [this](const Status& lookup) { return CanWaitForLoad(lookup); };
  r.wait_for_load = [this](std::unique_ptr<InferRequest> request, ResponseSink sink, TimePoint arrival) {
    WaitForLoad(std::move(request), std::move(sink), arrival);
  };
  r.shutting_down = &shutting_down_;
  return r;
}

}  // namespace inferd
