// InferenceServer's feature path (docs/features.md): a request of a model
// with `features.*` that carries the entity key and not the feature input
// gets the input from Redis (features/feature_fetcher.h), then goes through
// Dispatch again as if the client had sent it.
#include "features/feature_fetcher.h"
#include "features/feature_vector.h"
#include "server/inference_server.h"

namespace inferd {

bool InferenceServer::FetchFeatures(const ModelVersion& version, std::unique_ptr<InferRequest>& request,
                                    ResponseSink& sink, TimePoint arrival, bool may_wait) {
  const ModelSpec& spec = version.spec();
  const FeatureSpec& fs = *spec.features;
  for (const auto& in : request->inputs)
    if (in.name == fs.input) return false;  // the client sent the features itself
  auto it = request->parameters.find(fs.key_parameter);
  if (it == request->parameters.end()) return false;  // validation names the missing input
  std::string entity;
  if (const auto* s = std::get_if<std::string>(&it->second)) {
    entity = *s;
  } else if (const auto* i = std::get_if<int64_t>(&it->second)) {
    entity = std::to_string(*i);
  } else {
    sink.final(Status::InvalidArgument("parameter '" + fs.key_parameter + "' (the entity whose features fill input '" +
                                       fs.input + "') must be a string or an integer"));
    return true;
  }
  if (entity.empty() || entity.size() > 1024) {
    sink.final(Status::InvalidArgument("parameter '" + fs.key_parameter + "' must hold 1..1024 bytes"));
    return true;
  }
  const TensorSpec* input = spec.FindInput(fs.input);
  struct Waiting {
    std::unique_ptr<InferRequest> request;
    ResponseSink sink;
    FeatureSpec features;
    TensorSpec input;
    bool batched = false;
    std::string entity;
  };
  auto w = std::make_shared<Waiting>(
      Waiting{std::move(request), std::move(sink), fs, *input, spec.max_batch_size > 0, entity});
  const std::string model = spec.name;
  features_->Fetch(fs.connection, features::RedisKey(fs, entity), fs.names,
                   [this, w, model, arrival, may_wait](Result<redis::FieldValues> values) {
                     using Outcome = features::FeatureFetcher::Outcome;
                     if (!values.ok()) {
                       features_->Count(model, Outcome::kError);
                       return w->sink.final(values.status());
                     }
                     auto a = features::AssembleFeatures(w->features, w->input, w->batched, w->entity, *values);
                     if (!a.ok()) {
                       const bool missing = a.status().code() == StatusCode::kNotFound;
                       features_->Count(model, missing ? Outcome::kMissing : Outcome::kError);
                       return w->sink.final(a.status());
                     }
                     features_->Count(model, a->defaulted > 0 ? Outcome::kDefaulted : Outcome::kFetched);
                     w->request->inputs.push_back(std::move(a->tensor));
                     Dispatch(std::move(w->request), std::move(w->sink), arrival, may_wait);
                   });
  return true;
}

}  // namespace inferd
