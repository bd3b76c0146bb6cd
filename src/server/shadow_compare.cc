#include "server/shadow_compare.h"

#include <cmath>
#include <cstring>

#include "core/datatype.h"

namespace inferd {
namespace {

// Element i of a numeric tensor as a double.
double At(const Tensor& t, int64_t i) {
  const std::byte* p = t.data + static_cast<size_t>(i) * DataTypeByteSize(t.dtype);
  auto load = [p](auto v) {
    std::memcpy(&v, p, sizeof(v));
    return static_cast<double>(v);
  };
  switch (t.dtype) {
    case DataType::kBool:
      return load(uint8_t{}) != 0 ? 1.0 : 0.0;
    case DataType::kUint8:
      return load(uint8_t{});
    case DataType::kUint16:
      return load(uint16_t{});
    case DataType::kUint32:
      return load(uint32_t{});
    case DataType::kUint64:
      return load(uint64_t{});
    case DataType::kInt8:
      return load(int8_t{});
    case DataType::kInt16:
      return load(int16_t{});
    case DataType::kInt32:
      return load(int32_t{});
    case DataType::kInt64:
      return load(int64_t{});
    case DataType::kFp16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return HalfToFloat(h);
    }
    case DataType::kBf16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return Bf16ToFloat(h);
    }
    case DataType::kFp32:
      return load(float{});
    case DataType::kFp64:
      return load(double{});
    default:
      return 0;
  }
}

}  // namespace

ShadowVerdict CompareAnswers(const InferResponse& served, const InferResponse& shadow, const CompareSpec& rules) {
  const double tolerance = rules.tolerance;
  ShadowVerdict v;
  v.agreed = true;
  auto disagree = [&v](std::string why) {
    if (v.agreed) v.why = std::move(why);
    v.agreed = false;
  };
  for (const Tensor& a : served.outputs) {
    const Tensor* b = nullptr;
    for (const Tensor& t : shadow.outputs)
      if (t.name == a.name) b = &t;
    if (b == nullptr) {
      disagree("the shadow answered no '" + a.name + "'");
      continue;
    }
    if (a.dtype != b->dtype || a.shape != b->shape || a.byte_size != b->byte_size) {
      disagree("'" + a.name + "' differs in datatype or shape");
      continue;
    }
    if (a.dtype == DataType::kBytes) {
      if (a.byte_size && std::memcmp(a.data, b->data, a.byte_size) != 0) disagree("'" + a.name + "' differs");
      continue;
    }
    const int64_t n = a.element_count();
    bool within = true;
    for (int64_t i = 0; i < n; ++i) {
      const double x = At(a, i), y = At(*b, i);
      const double d = std::fabs(x - y);
      if (!(d <= v.max_abs_diff)) v.max_abs_diff = std::isnan(d) ? INFINITY : std::max(v.max_abs_diff, d);
      if (!(d <= tolerance * (1 + std::fabs(x)))) within = false;
    }
    const int64_t classes = a.shape.empty() ? 0 : a.shape.back();
    if (rules.classifier_outputs.count(a.name) && classes >= 1 && n > 0) {
      for (int64_t row = 0; row < n / classes; ++row) {
        int64_t ta = 0, tb = 0;
        for (int64_t c = 1; c < classes; ++c) {
          if (At(a, row * classes + c) > At(a, row * classes + ta)) ta = c;
          if (At(*b, row * classes + c) > At(*b, row * classes + tb)) tb = c;
        }
        if (ta != tb) {
          disagree("'" + a.name + "' top-1 differs in row " + std::to_string(row));
          break;
        }
      }
    } else if (!within) {
      disagree("'" + a.name + "' differs by up to " + std::to_string(v.max_abs_diff));
    }
  }
  return v;
}

}  // namespace inferd
