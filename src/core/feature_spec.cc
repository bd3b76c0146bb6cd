#include "core/feature_spec.h"

#include <cmath>

#include "core/model_spec.h"
#include "core/number_text.h"

namespace inferd {
namespace {

Status BadFeature(const std::string& name, const std::string& why) {
  return Status::InvalidArgument("field 'parameters." + std::string(kFeaturesPrefix) + name + "': " + why);
}

// A finite number, all of `s`.
std::optional<double> Number(const std::string& s) {
  bool is_int = false;
  int64_t i = 0;
  double d = 0;
  if (!ParseNumber(s, &is_int, &i, &d)) return std::nullopt;
  if (is_int) return static_cast<double>(i);
  if (!std::isfinite(d)) return std::nullopt;
  return d;
}

}  // namespace

Result<std::optional<FeatureSpec>> ParseFeatureSpec(const std::map<std::string, std::string>& parameters,
                                                    const ModelSpec& model) {
  const std::string prefix = kFeaturesPrefix;
  auto it = parameters.lower_bound(prefix);
  if (it == parameters.end() || it->first.compare(0, prefix.size(), prefix) != 0) return std::optional<FeatureSpec>();
  FeatureSpec f;
  std::optional<std::string> defaults;
  for (; it != parameters.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it) {
    const std::string name = it->first.substr(prefix.size());
    const std::string v(TrimSpace(it->second));
    if (name == "connection") {
      f.connection = v;
    } else if (name == "key_parameter") {
      f.key_parameter = v;
    } else if (name == "key_prefix") {
      f.key_prefix = it->second;  // as written: spaces may matter in a Redis key
    } else if (name == "input") {
      f.input = v;
    } else if (name == "names") {
      f.names = SplitList(v);
      for (size_t i = 0; i < f.names.size(); ++i) {
        if (f.names[i].empty()) return BadFeature(name, "an empty feature name");
        for (size_t k = 0; k < i; ++k)
          if (f.names[k] == f.names[i]) return BadFeature(name, "feature '" + f.names[i] + "' is listed twice");
      }
    } else if (name == "defaults") {
      defaults = v;
    } else {
      return BadFeature(name, "unknown setting (known: connection, key_parameter, key_prefix, input, names, defaults)");
    }
  }
  if (f.connection.empty()) return BadFeature("connection", "must name a redis connection of the jobs config");
  if (f.key_parameter.empty())
    return BadFeature("key_parameter", "must name the request parameter with the entity key");
  if (f.input.empty()) return BadFeature("input", "must name the input the features fill");
  if (f.names.empty()) return BadFeature("names", "must list the features (hash fields), comma-separated");
  const TensorSpec* in = model.FindInput(f.input);
  if (in == nullptr) return BadFeature("input", "model '" + model.name + "' has no input '" + f.input + "'");
  if (in->dtype == DataType::kBytes || in->dtype == DataType::kBool || DataTypeByteSize(in->dtype) == 0)
    return BadFeature("input", "input '" + f.input + "' must be numeric to hold features");
  int64_t elements = 1;
  for (int64_t d : in->dims) elements *= d;
  if (in->any_rank || elements < 0)
    return BadFeature("input", "input '" + f.input + "' needs fixed dims to hold features");
  if (static_cast<size_t>(elements) != f.names.size())
    return BadFeature("names", "input '" + f.input + "' holds " + std::to_string(elements) + " elements; " +
                                   std::to_string(f.names.size()) + " features are listed");
  f.defaults.assign(f.names.size(), std::nullopt);
  if (defaults && !defaults->empty()) {
    std::vector<std::string> parts = SplitList(*defaults);
    if (parts.size() != 1 && parts.size() != f.names.size())
      return BadFeature("defaults", "give one value for all features or one per feature (" +
                                        std::to_string(f.names.size()) + "), not " + std::to_string(parts.size()));
    for (size_t i = 0; i < f.names.size(); ++i) {
      const std::string& p = parts.size() == 1 ? parts[0] : parts[i];
      if (p.empty()) continue;
      auto d = Number(p);
      if (!d) return BadFeature("defaults", "'" + p + "' is not a number");
      f.defaults[i] = *d;
    }
  }
  return std::optional<FeatureSpec>(std::move(f));
}

}  // namespace inferd
