#include "server/shadow_traffic.h"

#include <optional>

#include "core/mutex.h"
#include "scheduler/pending_request.h"
#include "server/request_validation.h"
#include "server/shadow_compare.h"

namespace inferd {
namespace {

// Waits for both answers, then judges them once.
class Comparison {
 public:
  Comparison(std::shared_ptr<ModelStats> stats, std::shared_ptr<const CompareSpec> rules)
      : stats_(std::move(stats)), rules_(std::move(rules)) {}

  void Served(const Result<InferResponse>& r) {
    MutexLock g(&mu_);
    served_ = r.ok() ? std::optional<InferResponse>(*r) : std::nullopt;
    served_done_ = true;
    JudgeLocked();
  }
  void Shadowed(Result<InferResponse> r) {
    MutexLock g(&mu_);
    shadowed_ = std::move(r);
    JudgeLocked();
  }

 private:
  void JudgeLocked() TSA_REQUIRES(mu_) {
    if (!served_done_ || !shadowed_) return;
    if (!served_) return;  // the client got an error: nothing to compare with
    if (!shadowed_->ok()) {
      stats_->RecordShadow(/*failed=*/true, false, 0);
    } else {
      ShadowVerdict v = CompareAnswers(*served_, **shadowed_, *rules_);
      stats_->RecordShadow(false, v.agreed, v.max_abs_diff);
    }
    served_.reset();  // release the tensors
    shadowed_.reset();
    shadowed_ = Result<InferResponse>(Status::Cancelled("judged"));  // never judged twice
  }

  std::shared_ptr<ModelStats> stats_;
  const std::shared_ptr<const CompareSpec> rules_;
  Mutex mu_;
  bool served_done_ TSA_GUARDED_BY(mu_) = false;
  std::optional<InferResponse> served_ TSA_GUARDED_BY(mu_);
  std::optional<Result<InferResponse>> shadowed_ TSA_GUARDED_BY(mu_);
};

}  // namespace

InferCallback MirrorRequest(const InferRequest& request, std::shared_ptr<ModelVersion> shadow, InferCallback final,
                            Clock& clock, int64_t max_in_flight) {
  auto stats = shadow->stats();
  if (!stats->TryStartShadow(max_in_flight)) return final;
  auto copy = std::make_unique<InferRequest>(request);
  copy->model_version = shadow->version_string();
  copy->cancellation = nullptr;  // the shadow runs on even if the client leaves
  const ModelSpec& spec = shadow->spec();
  if (spec.batching.priority_levels > 0) copy->priority = spec.batching.priority_levels;  // lowest
  auto rows = ValidateAndNormalize(spec, copy.get());
  if (!rows.ok()) {  // the shadow version takes other inputs: a failed shadow
    stats->EndShadow();
    stats->RecordShadow(/*failed=*/true, false, 0);
    return final;
  }
  // Classifier outputs come from the config; outputs the client asked the
  // classification extension for are judged by top-1 too (both raw answers
  // are compared, before classification is applied to the client's).
  // The config's rules, shared with the shadow version (no copy per mirrored
  // request) unless the request adds classification outputs.
  std::shared_ptr<const CompareSpec> rules(shadow, &spec.compare);
  for (const auto& o : request.outputs) {
    if (o.classification == 0) continue;
    auto own = std::make_shared<CompareSpec>(*rules);
    for (const auto& c : request.outputs)
      if (c.classification > 0) own->classifier_outputs.insert(c.name);
    rules = std::move(own);
    break;
  }
  auto comparison = std::make_shared<Comparison>(stats, std::move(rules));
  auto pending = std::make_unique<PendingRequest>();
  pending->arrival = clock.Now();
  // Traced: the mirrored run is a span of its own under the request's model span ("shadow <model>"), and its
  // queue and compute spans go under it.
  std::shared_ptr<Span> span;
  if (copy->trace) {
    span = std::make_shared<Span>(copy->trace, "shadow " + spec.name, SpanKind::kInternal, UnixNanos(pending->arrival));
    span->SetAttribute("triton.model_name", spec.name);
    span->SetAttribute("triton.model_version", copy->model_version);
    copy->trace = span->AsParent();
  }
  pending->request = std::move(copy);
  pending->rows = *rows;
  pending->callback = [comparison, shadow, span](Result<InferResponse> r) {
    if (span) span->End(UnixNanosNow(), r.status());
    shadow->stats()->EndShadow();
    comparison->Shadowed(std::move(r));
  };
  Status st = shadow->scheduler().Enqueue(pending);
  if (!st.ok()) {  // the shadow's queue is full: it is the one that waits, never the client
    stats->EndShadow();
    stats->RecordShadow(/*failed=*/true, false, 0);
    return final;
  }
  return [comparison, final = std::move(final)](Result<InferResponse> r) {
    if (r.ok()) {
      InferResponse kept = *r;  // tensor views: no copy of the bytes
      final(std::move(r));
      comparison->Served(kept);
    } else {
      comparison->Served(r);
      final(std::move(r));
    }
  };
}

}  // namespace inferd
