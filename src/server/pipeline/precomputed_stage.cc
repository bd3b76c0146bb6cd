// Hybrid serving (docs/hybrid.md): a request with a precomputed key is looked
// up in the model's prediction store on a lookup thread
// (server/hybrid_serving.h); a fresh row answers it ("source":
// "precomputed"), otherwise it goes on to the next stage as any request
// ("source": "online"; written back when configured). Two stages: a request
// with a key and no inputs is looked up before validation (it has nothing to
// validate and cannot run online); a validated one after it.
#include "server/hybrid_serving.h"
#include "server/pipeline/stages.h"

namespace inferd {
namespace {

// An online answer may be written back when it holds every stored output as
// the model computes it: all outputs asked for, no classification.
bool AnswerHasEveryStoredOutput(const PrecomputedSpec& pc, const InferRequest& request) {
  if (request.outputs.empty()) return true;
  if (!StoreCanAnswer(pc, request)) return false;
  for (const auto& name : pc.outputs) {
    bool asked = false;
    for (const auto& o : request.outputs) asked |= o.name == name;
    if (!asked) return false;
  }
  return true;
}

std::string Joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// The key as error messages show it: quoted, at most 64 bytes.
std::string ShownKey(const std::string& key) { return "'" + (key.size() > 64 ? key.substr(0, 64) + "..." : key) + "'"; }

InferResponse StoredAnswer(const RequestContext& ctx, const std::string& version, std::vector<Tensor> outputs) {
  InferResponse resp;
  resp.model_name = ctx.handle.spec().name;
  resp.model_version = version;
  resp.id = ctx.request->id;
  const auto& wanted = ctx.request->outputs;
  if (wanted.empty()) {
    resp.outputs = std::move(outputs);
  } else {
    for (const auto& w : wanted)
      for (auto& t : outputs)
        if (t.name == w.name) resp.outputs.push_back(std::move(t));
  }
  resp.parameters["source"] = std::string("precomputed");
  return resp;
}

class PrecomputedStage final : public RequestStage {
 public:
  PrecomputedStage(HybridServing* hybrid, const std::atomic<bool>* shutting_down, bool key_only)
      : hybrid_(hybrid), shutting_down_(shutting_down), key_only_(key_only) {}
  const char* name() const override { return key_only_ ? "precomputed_key_only" : "precomputed"; }
  bool Traced(const RequestContext& ctx) const override {
    return ctx.handle.spec().precomputed.has_value() && !ctx.request->background;
  }

  Verdict Process(std::unique_ptr<RequestContext>& ctx, const RequestPipeline& pipeline) const override {
    const ModelSpec& spec = ctx->handle.spec();
    if (!spec.precomputed || ctx->request->background) return Verdict::kContinue;
    if (key_only_ && !ctx->request->inputs.empty()) return Verdict::kContinue;  // validated first
    Result<std::optional<std::string>> key = HybridKey(*spec.precomputed, *ctx->request, key_only_ ? 1 : ctx->rows);
    if (key_only_ && (!key.ok() || !key->has_value())) return Verdict::kContinue;  // validation says what is missing
    if (!key.ok()) {
      ctx->handle.version->stats()->RecordFailure(FailureReason::kInvalid, 0);
      ctx->sink.final(key.status());
      return Verdict::kTaken;
    }
    if (!key->has_value()) return Verdict::kContinue;
    return Lookup(std::move(*key).value(), ctx, pipeline);
  }

 private:
  Verdict Lookup(std::string key, std::unique_ptr<RequestContext>& ctx, const RequestPipeline& pipeline) const {
    std::shared_ptr<const ModelSpec> spec(ctx->handle.version, &ctx->handle.spec());
    const PrecomputedSpec& pc = *spec->precomputed;
    const std::string version = ctx->handle.version->version_string();
    ctx->skip_cache = true;  // a store's path is never cached
    // What runs online says so, and is written back when configured.
    const bool write_back = pc.write_back && AnswerHasEveryStoredOutput(pc, *ctx->request);
    // The client's callback: a stored answer goes straight to it; what runs
    // online goes through the wrapper below (exactly one of them is called).
    auto client = std::make_shared<InferCallback>(std::move(ctx->sink.final));
    ctx->sink.final = [hybrid = hybrid_, spec, version, key, write_back, client](Result<InferResponse> r) {
      if (r.ok()) {
        r->parameters["source"] = std::string("online");
        if (write_back) hybrid->WriteBack(spec, version, key, *r);
      }
      (*client)(std::move(r));
    };
    const bool lookup_only = ctx->request->inputs.empty();  // no inputs: it cannot run online
    if (!StoreCanAnswer(pc, *ctx->request)) {
      hybrid_->CountBypass(spec->name);
      if (!lookup_only) return Verdict::kContinue;
      (*client)(Status::InvalidArgument("model '" + spec->name +
                                        "': the request asks for outputs the precomputed store does not hold "
                                        "(it holds: " +
                                        Joined(pc.outputs) + ") and has no inputs to run online"));
      return Verdict::kTaken;
    }
    // The lookup callback runs on a lookup thread (or here, when the lookup
    // queue is full); the request waits for it in `parked`.
    std::shared_ptr<RequestContext> parked(std::move(ctx));
    hybrid_->Lookup(
        spec, version, key,
        [parked, client, spec, version, key_shown = ShownKey(key), lookup_only, &pipeline,
         shutting_down = shutting_down_](HybridServing::Outcome o) {
          using Kind = HybridServing::Outcome::Kind;
          const PrecomputedSpec& pc = *spec->precomputed;
          if (o.kind == Kind::kHit) return (*client)(StoredAnswer(*parked, version, std::move(o.outputs)));
          if (shutting_down->load()) return (*client)(Status::Unavailable("the server is shutting down"));
          const std::string store = "model '" + spec->name + "': the precomputed store ('" + pc.connection +
                                    "', table '" + pc.table + "') cannot answer: ";
          if (lookup_only) {  // nothing to run online
            if (o.kind == Kind::kError) return (*client)(Status::Unavailable(store + o.error.message()));
            return (*client)(Status::NotFound("model '" + spec->name + "' has no " +
                                              (o.kind == Kind::kStale ? "fresh " : "") + "precomputed answer for key " +
                                              key_shown + ", and the request has no inputs to run it online"));
          }
          if (o.kind == Kind::kError && pc.fail_on_store_error)
            return (*client)(Status::Unavailable(store + o.error.message()));
          pipeline.Continue(std::make_unique<RequestContext>(std::move(*parked)));
        });
    return Verdict::kTaken;
  }

  HybridServing* const hybrid_;
  const std::atomic<bool>* const shutting_down_;
  const bool key_only_;
};

}  // namespace

std::unique_ptr<RequestStage> MakePrecomputedKeyOnlyStage(HybridServing* hybrid,
                                                          const std::atomic<bool>* shutting_down) {
  return std::make_unique<PrecomputedStage>(hybrid, shutting_down, /*key_only=*/true);
}

std::unique_ptr<RequestStage> MakePrecomputedStage(HybridServing* hybrid, const std::atomic<bool>* shutting_down) {
  return std::make_unique<PrecomputedStage>(hybrid, shutting_down, /*key_only=*/false);
}

}  // namespace inferd
