#include "server/request_validation.h"

#include <algorithm>

#include "core/padding.h"
#include "server/classification.h"

namespace inferd {
namespace {

bool DimsMatch(const Shape& want, const Shape& got, size_t offset) {
  if (got.size() != want.size() + offset) return false;
  for (size_t i = 0; i < want.size(); ++i)
    if (want[i] != -1 && want[i] != got[i + offset]) return false;
  return true;
}

std::string Expected(const ModelSpec& spec, const TensorSpec& t) {
  Shape s;
  s.reserve(t.dims.size() + 1);  // also keeps GCC 12's -Warray-bounds false positive away
  if (spec.max_batch_size > 0) s.push_back(-1);
  s.insert(s.end(), t.dims.begin(), t.dims.end());
  return ShapeToString(s);
}

}  // namespace

Status ApplySchedulingParameters(InferRequest* r) {
  for (const auto& [key, value] : r->parameters) {
    if (key != "priority" && key != "timeout") continue;
    int64_t v = 0;
    if (const auto* i = std::get_if<int64_t>(&value)) {
      v = *i;
    } else if (const auto* d = std::get_if<double>(&value);
               d && *d >= 0 && *d < 9.2e18 && *d == static_cast<double>(static_cast<int64_t>(*d))) {
      v = static_cast<int64_t>(*d);  // range checked first: the cast is defined
    } else {
      return Status::InvalidArgument("request parameter '" + key + "' must be a non-negative integer");
    }
    if (v < 0) return Status::InvalidArgument("request parameter '" + key + "' must be >= 0");
    if (key == "priority") {
      if (v > UINT32_MAX) return Status::InvalidArgument("request parameter 'priority' is too large");
      r->priority = static_cast<uint32_t>(v);
    } else {
      r->timeout_us = static_cast<uint64_t>(v);
    }
  }
  return Status::OK();
}

Result<int64_t> ValidateAndNormalize(const ModelSpec& spec, InferRequest* r) {
  const std::string& model = spec.name;
  std::vector<Tensor> ordered(spec.inputs.size());
  std::vector<bool> seen(spec.inputs.size(), false);
  for (Tensor& t : r->inputs) {
    auto it =
        std::find_if(spec.inputs.begin(), spec.inputs.end(), [&](const TensorSpec& s) { return s.name == t.name; });
    if (it == spec.inputs.end()) {
      return Status::InvalidArgument("unexpected inference input '" + t.name + "' for model '" + model + "'");
    }
    const size_t idx = static_cast<size_t>(it - spec.inputs.begin());
    if (seen[idx]) return Status::InvalidArgument("input '" + t.name + "' is given more than once");
    seen[idx] = true;
    ordered[idx] = std::move(t);
  }
  // A padded model's mask input may be left out: the server fills it in.
  const PaddedInput* mask = spec.batching.padding ? spec.batching.padding->mask() : nullptr;
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    // Optional inputs may be left out of requests to models that do not
    // batch (a batch concatenates every input, so each request needs all).
    if (!seen[i] && !(spec.inputs[i].optional && spec.max_batch_size == 0) && !(mask && mask->input == i)) {
      return Status::InvalidArgument("expected " + std::to_string(spec.inputs.size()) + " inputs but got " +
                                     std::to_string(r->inputs.size()) + " inputs for model '" + model +
                                     "': missing input '" + spec.inputs[i].name + "'");
    }
  }
  int64_t rows = 1;
  bool first_input = true;
  std::string first_name;
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    if (!seen[i]) continue;  // an optional input the request leaves out
    const TensorSpec& s = spec.inputs[i];
    const Tensor& t = ordered[i];
    if (t.dtype != s.dtype) {
      return Status::InvalidArgument("inference input '" + t.name + "' data-type is '" +
                                     std::string(DataTypeToWire(t.dtype)) + "', but model '" + model + "' expects '" +
                                     std::string(DataTypeToWire(s.dtype)) + "'");
    }
    for (int64_t d : t.shape)
      if (d < 0)
        return Status::InvalidArgument("input '" + t.name + "' has a negative dimension in shape " +
                                       ShapeToString(t.shape));
    if (!s.any_rank) {
      const size_t offset = spec.max_batch_size > 0 ? 1 : 0;
      if (!DimsMatch(s.dims, t.shape, offset)) {
        return Status::InvalidArgument("unexpected shape for input '" + t.name + "' for model '" + model +
                                       "'. Expected " + Expected(spec, s) + ", got " + ShapeToString(t.shape));
      }
    }
    if (spec.max_batch_size > 0) {
      if (t.shape.empty()) return Status::InvalidArgument("input '" + t.name + "' needs a batch dimension");
      if (first_input)
        rows = t.shape[0];
      else if (t.shape[0] != rows) {
        return Status::InvalidArgument("inputs of model '" + model + "' disagree on the batch size: '" + first_name +
                                       "' has " + std::to_string(rows) + ", '" + t.name + "' has " +
                                       std::to_string(t.shape[0]));
      }
    }
    INFERD_RETURN_IF_ERROR(t.Validate());
    if (first_input) first_name = t.name;
    first_input = false;
  }
  if (spec.max_batch_size > 0 && rows != 1 && spec.HasRaggedInputs()) {
    return Status::InvalidArgument("model '" + model +
                                   "' batches ragged inputs: each request must have batch size 1, got " +
                                   std::to_string(rows));
  }
  if (spec.max_batch_size > 0) {
    if (rows < 1 || rows > spec.max_batch_size) {
      return Status::InvalidArgument("inference request batch-size must be <= " + std::to_string(spec.max_batch_size) +
                                     " for '" + model + "', got " + std::to_string(rows));
    }
  } else {
    rows = 1;
  }
  if (!spec.outputs.empty()) {
    for (const auto& o : r->outputs) {
      if (!spec.FindOutput(o.name) && !spec.FindRule(o.name)) {
        return Status::InvalidArgument("unexpected inference output '" + o.name + "' for model '" + model + "'");
      }
    }
  }
  INFERD_RETURN_IF_ERROR(CheckClassification(spec, r->outputs));
  if (spec.batching.padding) {
    // A batch pads every padded input to one length: a request's must agree.
    const PaddedInput& first = spec.batching.padding->inputs.front();
    const int64_t length = ordered[first.input].shape[first.axis];
    for (const PaddedInput& p : spec.batching.padding->inputs) {
      if (!seen[p.input]) continue;
      const int64_t l = ordered[p.input].shape[p.axis];
      if (l != length) {
        return Status::InvalidArgument("input '" + p.name + "' has " + std::to_string(l) + " positions but '" +
                                       first.name + "' has " + std::to_string(length) + " (model '" + model +
                                       "' pads them together: they must have the same length)");
      }
    }
  }
  if (mask && !seen[mask->input]) {
    // Ones for every position of the request's own length (the first padded input's).
    const PaddedInput& first = spec.batching.padding->inputs.front();
    const Tensor& in = ordered[first.input];
    ordered[mask->input] =
        FilledTensor(mask->name, spec.inputs[mask->input].dtype, {rows, in.shape[first.axis]}, mask->one_bytes);
    seen[mask->input] = true;
  }
  // Spec order; optional inputs the request left out are not passed on.
  r->inputs.clear();
  for (size_t i = 0; i < ordered.size(); ++i) {
    if (seen[i]) r->inputs.push_back(std::move(ordered[i]));
  }
  return rows;
}

}  // namespace inferd
