// The feature join (docs/features.md): a request of a model with
// `features.*` that carries the entity key and not the feature input gets
// the input from Redis (features/feature_fetcher.h), then goes on to the next
// stage on the same pinned version, as if the client had sent it.
#include "features/feature_fetcher.h"
#include "features/feature_vector.h"
#include "server/pipeline/stages.h"

namespace inferd {
namespace {

class FeatureStage final : public RequestStage {
 public:
  explicit FeatureStage(features::FeatureFetcher* fetcher) : fetcher_(fetcher) {}
  const char* name() const override { return "features"; }
  bool Traced(const RequestContext& ctx) const override { return ctx.handle.spec().features.has_value(); }

  Verdict Process(std::unique_ptr<RequestContext>& ctx, const RequestPipeline& pipeline) const override {
    const ModelSpec& spec = ctx->handle.spec();
    if (!spec.features) return Verdict::kContinue;
    const FeatureSpec& fs = *spec.features;
    InferRequest& request = *ctx->request;
    for (const auto& in : request.inputs)
      if (in.name == fs.input) return Verdict::kContinue;  // the client sent the features itself
    auto it = request.parameters.find(fs.key_parameter);
    if (it == request.parameters.end()) return Verdict::kContinue;  // validation names the missing input
    std::string entity;
    if (const auto* s = std::get_if<std::string>(&it->second)) {
      entity = *s;
    } else if (const auto* i = std::get_if<int64_t>(&it->second)) {
      entity = std::to_string(*i);
    } else {
      ctx->sink.final(Status::InvalidArgument("parameter '" + fs.key_parameter +
                                              "' (the entity whose features fill input '" + fs.input +
                                              "') must be a string or an integer"));
      return Verdict::kTaken;
    }
    if (entity.empty() || entity.size() > 1024) {
      ctx->sink.final(Status::InvalidArgument("parameter '" + fs.key_parameter + "' must hold 1..1024 bytes"));
      return Verdict::kTaken;
    }
    // The pinned version (held by the context) keeps `spec` alive while the fetch waits.
    const TensorSpec* input = spec.FindInput(fs.input);
    std::shared_ptr<RequestContext> parked(std::move(ctx));
    fetcher_->Fetch(fs.connection, features::RedisKey(fs, entity), fs.names,
                    [fetcher = fetcher_, parked, &fs, input, &pipeline, entity,
                     batched = spec.max_batch_size > 0](Result<redis::FieldValues> values) {
                      using Outcome = features::FeatureFetcher::Outcome;
                      const std::string& model = parked->handle.spec().name;
                      if (!values.ok()) {
                        fetcher->Count(model, Outcome::kError);
                        return parked->sink.final(values.status());
                      }
                      auto a = features::AssembleFeatures(fs, *input, batched, entity, *values);
                      if (!a.ok()) {
                        const bool missing = a.status().code() == StatusCode::kNotFound;
                        fetcher->Count(model, missing ? Outcome::kMissing : Outcome::kError);
                        return parked->sink.final(a.status());
                      }
                      fetcher->Count(model, a->defaulted > 0 ? Outcome::kDefaulted : Outcome::kFetched);
                      parked->request->inputs.push_back(std::move(a->tensor));
                      pipeline.Continue(std::make_unique<RequestContext>(std::move(*parked)));
                    });
    return Verdict::kTaken;
  }

 private:
  features::FeatureFetcher* const fetcher_;
};

}  // namespace

std::unique_ptr<RequestStage> MakeFeatureStage(features::FeatureFetcher* fetcher) {
  return std::make_unique<FeatureStage>(fetcher);
}

}  // namespace inferd
