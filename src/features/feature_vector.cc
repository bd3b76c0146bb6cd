#include "features/feature_vector.h"

#include <cmath>
#include <cstdlib>
#include <cstring>

namespace inferd::features {
namespace {

template <typename T>
void Put(std::string* out, T v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof v);
}

// One element of `dt` from `d` (range-checked for integer types).
bool PutElement(std::string* out, DataType dt, double d) {
  auto in = [&](double lo, double hi) { return d >= lo && d <= hi && d == std::floor(d); };
  switch (dt) {
    case DataType::kFp32:
      Put(out, static_cast<float>(d));
      return true;
    case DataType::kFp64:
      Put(out, d);
      return true;
    case DataType::kInt8:
      if (!in(-128, 127)) return false;
      Put(out, static_cast<int8_t>(d));
      return true;
    case DataType::kInt16:
      if (!in(-32768, 32767)) return false;
      Put(out, static_cast<int16_t>(d));
      return true;
    case DataType::kInt32:
      if (!in(-2147483648.0, 2147483647.0)) return false;
      Put(out, static_cast<int32_t>(d));
      return true;
    case DataType::kInt64:
      if (!in(-9.2e18, 9.2e18)) return false;
      Put(out, static_cast<int64_t>(d));
      return true;
    case DataType::kUint8:
      if (!in(0, 255)) return false;
      Put(out, static_cast<uint8_t>(d));
      return true;
    case DataType::kUint16:
      if (!in(0, 65535)) return false;
      Put(out, static_cast<uint16_t>(d));
      return true;
    case DataType::kUint32:
      if (!in(0, 4294967295.0)) return false;
      Put(out, static_cast<uint32_t>(d));
      return true;
    case DataType::kUint64:
      if (!in(0, 1.8e19)) return false;
      Put(out, static_cast<uint64_t>(d));
      return true;
    default:
      return false;  // FP16 / BF16 / BOOL / BYTES: refused by ParseFeatureSpec or unsupported here
  }
}

std::optional<double> ParseNumber(const std::string& s) {
  if (s.empty() || s.size() > 64) return std::nullopt;
  char* end = nullptr;
  const double d = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || !std::isfinite(d)) return std::nullopt;
  return d;
}

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
      auto v = ParseNumber(*values[i]);
      if (!v)
        return Status::Internal("feature '" + spec.names[i] + "' of entity '" + Shown(entity) + "' is '" +
                                Shown(*values[i]) + "' in Redis, not a number");
      d = *v;
    }
    if (!PutElement(&data, input.dtype, d))
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
