#include "features/feature_vector.h"

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "core/number_text.h"

namespace inferd::features {
namespace {

std::string Shown(const std::string& s) { return s.size() > 64 ? s.substr(0, 64) + "..." : s; }

}  // namespace

Result<Assembled> AssembleFeatures(const FeatureSpec& spec, const TensorSpec& input, bool batched,
                                   const std::string& entity, const redis::FieldValues& values) {
  if (values.size() != spec.names.size())
    return Status::Internal("Redis answered " + std::to_string(values.size()) + " values for " +
                            std::to_string(spec.names.size()) + " features");
  Assembled a;
  std::string data;
  data.reserve(spec.names.size() * DataTypeByteSize(input.dtype));
  std::string missing;
  size_t n_missing = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    bool is_int = false;
    int64_t n = 0;
    double d = 0;
    if (!values[i]) {
      if (!spec.defaults[i]) {
        ++n_missing;
        if (n_missing <= 10) missing += (missing.empty() ? "" : ", ") + spec.names[i];
        continue;
      }
      d = *spec.defaults[i];
      ++a.defaulted;
    } else {
      if (!ParseNumber(*values[i], &is_int, &n, &d) || (!is_int && !std::isfinite(d)))
        return Status::Internal("feature '" + spec.names[i] + "' of entity '" + Shown(entity) + "' is '" +
                                Shown(*values[i]) + "' in Redis, not a number");
    }
    if (!AppendNumber(&data, input.dtype, is_int, n, d))
      return Status::Internal("feature '" + spec.names[i] + "' of entity '" + Shown(entity) + "' does not fit input '" +
                              input.name + "' (" + std::string(DataTypeToWire(input.dtype)) + ")");
  }
  if (n_missing == values.size())
    return Status::NotFound("entity '" + Shown(entity) + "' has no features in Redis (key '" +
                            Shown(RedisKey(spec, entity)) + "') and its features have no defaults");
  if (n_missing > 0)
    return Status::NotFound("entity '" + Shown(entity) + "' lacks feature" + (n_missing > 1 ? "s " : " ") + missing +
                            (n_missing > 10 ? ", ..." : "") + " in Redis (key '" + Shown(RedisKey(spec, entity)) +
                            "') and " + (n_missing > 1 ? "they have" : "it has") + " no default");
  Shape shape;
  if (batched) shape.push_back(1);
  for (int64_t d : input.dims) shape.push_back(d);
  a.tensor =
      Tensor::Own(input.name, input.dtype, std::move(shape), std::make_shared<const std::string>(std::move(data)));
  return a;
}

}  // namespace inferd::features
