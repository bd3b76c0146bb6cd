// InferenceServer's request path: route, validate, enqueue on the version's
// scheduler; under on-demand residency, wait (bounded) for a model that is
// not resident to load.
#include "server/classification.h"
#include "server/hybrid_serving.h"
#include "server/inference_server.h"
#include "server/output_rules.h"
#include "server/request_validation.h"
#include "server/shadow_traffic.h"

namespace inferd {

void InferenceServer::InferAsync(std::unique_ptr<InferRequest> request, InferCallback callback) {
  Dispatch(std::move(request), ResponseSink{nullptr, std::move(callback)}, clock_->Now(), /*may_wait=*/true);
}

void InferenceServer::InferAsync(std::unique_ptr<InferRequest> request, ResponseSink sink) {
  Dispatch(std::move(request), std::move(sink), clock_->Now(), /*may_wait=*/true);
}

Status InferenceServer::Admit(const std::string& name, const std::string& version) const {
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
  Duration wait = options_.load_wait;
  if (request->timeout_us > 0) wait = std::min<Duration>(wait, std::chrono::microseconds(request->timeout_us));
  const std::string name = request->model_name;
  manager_->LoadInBackground(name, OnDemandLoader::Waiter{std::move(request), std::move(sink.final),
                                                          std::move(sink.partial), arrival, arrival + wait});
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
  w.deadline = w.arrival + options_.load_wait;
  w.resident = std::move(then);
  manager_->LoadInBackground(name, std::move(w));
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
  std::shared_ptr<ModelVersion> shadow;
  auto mv = FindVersion(request->model_name, request->model_version, request.get(), &shadow);
  if (!mv.ok()) {
    if (may_wait && CanWaitForLoad(mv.status())) return WaitForLoad(std::move(request), std::move(sink), arrival);
    return sink.final(mv.status());
  }
  ModelVersion& version = **mv;
  version.Touch(arrival);
  Status st = ApplySchedulingParameters(request.get());
  // features.*: a request with the entity key and without the feature input
  // waits for Redis and comes back here with it (server/feature_dispatch.cc).
  if (st.ok() && features_ && version.spec().features && FetchFeatures(version, request, sink, arrival, may_wait))
    return;
  // A hybrid model's request with a key and no inputs only asks the
  // prediction store (server/hybrid_dispatch.cc): nothing to validate.
  if (st.ok() && hybrid_ && version.spec().precomputed && !request->background && request->inputs.empty()) {
    Result<std::optional<std::string>> key = HybridKey(*version.spec().precomputed, *request, 1);
    if (key.ok() && key->has_value()) {
      const bool asked_default = request->model_version.empty();
      return DispatchHybrid(std::move(*key).value(), Forwarded{std::move(*mv), std::move(shadow), std::move(request),
                                                               std::move(sink), 1, arrival, may_wait, asked_default});
    }
  }
  Result<int64_t> rows = st.ok() ? ValidateAndNormalize(version.spec(), request.get()) : Result<int64_t>(st);
  if (!rows.ok()) {
    version.stats()->RecordFailure(FailureReason::kInvalid, 0);
    return sink.final(rows.status());
  }
  // Whether the caller left the version to the server (re-resolved below if
  // the routed version retires before the request is queued).
  const bool asked_default = request->model_version.empty();
  // Hybrid serving (precomputed.* parameters): a request with a key is
  // looked up in the prediction store first (server/hybrid_dispatch.cc).
  if (hybrid_ && version.spec().precomputed && !request->background) {
    Result<std::optional<std::string>> key = HybridKey(*version.spec().precomputed, *request, *rows);
    if (!key.ok()) {
      version.stats()->RecordFailure(FailureReason::kInvalid, 0);
      return sink.final(key.status());
    }
    if (key->has_value()) {
      return DispatchHybrid(std::move(*key).value(),
                            Forwarded{std::move(*mv), std::move(shadow), std::move(request), std::move(sink), *rows,
                                      arrival, may_wait, asked_default});
    }
  }
  // The response cache (response_cache { enable: true }): a hit skips the
  // queue; a miss stores the successful answer -- after rules and
  // classification, which the key covers -- for the next identical request.
  if (cache_ && version.spec().response_cache) {
    request->model_version = version.version_string();  // the key holds the version that answers
    const TimePoint t0 = clock_->Now();
    // The snapshot's identity: its address and load time (a reloaded version is a new object, loaded later).
    std::string key = ResponseCacheKey(*request, static_cast<uint64_t>(reinterpret_cast<uintptr_t>(&version)),
                                       static_cast<uint64_t>(version.loaded_at().time_since_epoch().count()));
    if (auto hit = cache_->Lookup(key)) {
      InferResponse resp = *hit;
      resp.id = request->id;
      version.stats()->RecordCacheHit(static_cast<uint64_t>(std::max<int64_t>(0, (clock_->Now() - t0).count())));
      return sink.final(std::move(resp));
    }
    auto stats = version.stats();
    const uint64_t lookup_ns = static_cast<uint64_t>(std::max<int64_t>(0, (clock_->Now() - t0).count()));
    sink.final = [cache = cache_.get(), key = std::move(key), stats, lookup_ns, clock = clock_,
                  final = std::move(sink.final)](Result<InferResponse> r) mutable {
      if (r.ok()) {
        const TimePoint t1 = clock->Now();
        cache->Insert(std::move(key), *r);
        stats->RecordCacheMiss(lookup_ns + static_cast<uint64_t>(std::max<int64_t>(0, (clock->Now() - t1).count())));
      }
      final(std::move(r));
    };
  }
  Forward(Forwarded{std::move(*mv), std::move(shadow), std::move(request), std::move(sink), *rows, arrival, may_wait,
                    asked_default});
}

void InferenceServer::Forward(Forwarded f) {
  ModelVersion& version = *f.version;
  std::unique_ptr<InferRequest> request = std::move(f.request);
  ResponseSink sink = std::move(f.sink);
  std::shared_ptr<ModelVersion> shadow = std::move(f.shadow);
  const TimePoint arrival = f.arrival;
  const bool may_wait = f.may_wait;
  const bool asked_default = f.asked_default;
  // Output rules and the classification extension work on the answer.
  Classification classify = PlanClassification(version.spec(), request->outputs);
  RulePlan rules = PlanRules(version.spec(), request.get());
  if (!classify.outputs.empty() || !rules.rules.empty()) {
    sink.final = [classify = std::move(classify), rules = std::move(rules),
                  final = std::move(sink.final)](Result<InferResponse> r) {
      if (r.ok()) {
        Status st = ApplyRules(rules, &*r);
        if (st.ok()) st = ApplyClassification(classify, &*r);
        if (!st.ok()) return final(st);
      }
      final(std::move(r));
    };
  }
  request->model_version = version.version_string();
  // The traffic policy mirrors this one: the shadow runs a copy; the client's
  // answer is compared with it after it was delivered (server/shadow_traffic.h).
  if (shadow)
    sink.final =
        MirrorRequest(*request, std::move(shadow), std::move(sink.final), *clock_, options_.shadow_max_in_flight);
  auto pending = std::make_unique<PendingRequest>();
  pending->request = std::move(request);
  pending->callback = std::move(sink.final);
  pending->partial = std::move(sink.partial);
  pending->rows = f.rows;
  pending->arrival = arrival;
  Status st = version.scheduler().Enqueue(pending);
  // A reload or an eviction may have retired this version between the
  // lookup and the enqueue; the request then goes to what serves now, once,
  // instead of failing (swaps lose no requests), or waits for the model to
  // load again (on demand).
  if (st.code() == StatusCode::kUnavailable && !shutting_down_.load()) {
    auto now = FindVersion(pending->request->model_name, asked_default ? "" : pending->request->model_version,
                           pending->request.get());
    if (!now.ok() && may_wait && CanWaitForLoad(now.status())) {
      if (asked_default) pending->request->model_version.clear();
      return WaitForLoad(std::move(pending->request),
                         ResponseSink{std::move(pending->partial), std::move(pending->callback)}, arrival);
    }
    Result<int64_t> again = now.ok() && now->get() != &version
                                ? ValidateAndNormalize((*now)->spec(), pending->request.get())
                                : Result<int64_t>(st);
    if (again.ok()) {
      pending->rows = *again;
      pending->request->model_version = (*now)->version_string();
      st = (*now)->scheduler().Enqueue(pending);
    }
  }
  if (!st.ok()) {
    version.stats()->RecordFailure(FailureReason::kRejected, 0);
    pending->callback(st);
  }
}

}  // namespace inferd
