#include "server/classification.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>

namespace inferd {
namespace {

template <typename T>
T Load(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

Status TooFew(const std::string& output, int64_t classes, uint32_t k) {
  return Status::InvalidArgument("output '" + output + "' has " + std::to_string(classes) +
                                 " classes; classification asks for " + std::to_string(k));
}

}  // namespace

bool IsNumeric(DataType dt) { return dt != DataType::kBytes && dt != DataType::kBool && dt != DataType::kInvalid; }

float ValueAsFloat(const Tensor& t, int64_t i) {
  const std::byte* p = t.data + i * static_cast<int64_t>(DataTypeByteSize(t.dtype));
  switch (t.dtype) {
    case DataType::kUint8:
      return Load<uint8_t>(p);
    case DataType::kUint16:
      return Load<uint16_t>(p);
    case DataType::kUint32:
      return static_cast<float>(Load<uint32_t>(p));
    case DataType::kUint64:
      return static_cast<float>(Load<uint64_t>(p));
    case DataType::kInt8:
      return Load<int8_t>(p);
    case DataType::kInt16:
      return Load<int16_t>(p);
    case DataType::kInt32:
      return static_cast<float>(Load<int32_t>(p));
    case DataType::kInt64:
      return static_cast<float>(Load<int64_t>(p));
    case DataType::kFp16:
      return HalfToFloat(Load<uint16_t>(p));
    case DataType::kBf16:
      return Bf16ToFloat(Load<uint16_t>(p));
    case DataType::kFp32:
      return Load<float>(p);
    case DataType::kFp64:
      return static_cast<float>(Load<double>(p));
    default:
      return 0;
  }
}

std::vector<int64_t> TopIndices(const std::vector<float>& values, size_t k) {
  std::vector<int64_t> order(values.size());
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
                    [&](int64_t a, int64_t b) {
                      const bool nan_a = std::isnan(values[a]), nan_b = std::isnan(values[b]);
                      if (nan_a != nan_b) return nan_b;
                      if (!nan_a && values[a] != values[b]) return values[a] > values[b];
                      return a < b;
                    });
  order.resize(k);
  return order;
}

Classification PlanClassification(const ModelSpec& spec, const std::vector<RequestedOutput>& requested) {
  Classification plan;
  plan.batched = spec.max_batch_size > 0;
  for (const auto& o : requested) {
    if (o.classification == 0) continue;
    const TensorSpec* t = spec.FindOutput(o.name);
    plan.outputs.push_back({o.name, o.classification, t ? t->labels : nullptr});
  }
  return plan;
}

Status CheckClassification(const ModelSpec& spec, const std::vector<RequestedOutput>& requested) {
  for (const auto& o : requested) {
    if (o.classification == 0) continue;
    const TensorSpec* t = spec.FindOutput(o.name);
    if (t == nullptr) continue;  // auto-completed without outputs: checked on the answer
    if (!t->dtype_assumed && !IsNumeric(t->dtype)) {
      return Status::InvalidArgument("output '" + o.name + "' is " + std::string(DataTypeToWire(t->dtype)) +
                                     ": classification needs a numeric output");
    }
    const int64_t classes = t->any_rank ? -1 : ElementCount(t->dims);
    if (classes >= 0 && o.classification > classes) return TooFew(o.name, classes, o.classification);
  }
  return Status::OK();
}

Result<Tensor> Classify(const Tensor& t, uint32_t k, bool batched, const std::vector<std::string>* labels) {
  if (!IsNumeric(t.dtype)) {
    return Status::InvalidArgument("output '" + t.name + "' is " + std::string(DataTypeToWire(t.dtype)) +
                                   ": classification needs a numeric output");
  }
  const int64_t total = t.element_count();
  if (batched && t.shape.empty()) return Status::Internal("output '" + t.name + "' has no batch dimension");
  const int64_t rows = batched ? t.shape[0] : 1;
  const int64_t classes = rows > 0 ? total / rows : 0;
  if (k > classes) return TooFew(t.name, classes, k);
  std::string out;
  std::vector<float> values(static_cast<size_t>(classes));
  char value[64];
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < classes; ++c) values[c] = ValueAsFloat(t, r * classes + c);
    for (int64_t c : TopIndices(values, k)) {
      std::snprintf(value, sizeof value, "%f", static_cast<double>(values[c]));
      std::string element = std::string(value) + ":" + std::to_string(c);
      if (labels && static_cast<size_t>(c) < labels->size()) element += ":" + (*labels)[c];
      AppendBytesElement(&out, element);
    }
  }
  Shape shape = batched ? Shape{rows, static_cast<int64_t>(k)} : Shape{static_cast<int64_t>(k)};
  return Tensor::Own(t.name, DataType::kBytes, std::move(shape), std::make_shared<const std::string>(std::move(out)));
}

Status ApplyClassification(const Classification& plan, InferResponse* response) {
  for (const auto& o : plan.outputs) {
    for (Tensor& t : response->outputs) {
      if (t.name != o.name) continue;
      INFERD_ASSIGN_OR_RETURN(t, Classify(t, o.k, plan.batched, o.labels.get()));
    }
  }
  return Status::OK();
}

}  // namespace inferd
