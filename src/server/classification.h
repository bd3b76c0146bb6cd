// Triton's classification extension: an output requested with a
// classification count k is answered as its k largest entries per batch
// row, each a BYTES element "value:index" or "value:index:label" (the label
// from the output's label_filename), highest value first; the value prints
// as C's %f of the entry converted to float. The answer has shape [rows, k]
// for a model with max_batch_size > 0 and [k] otherwise.
//
// Unlike Triton, which silently returns fewer entries, a k larger than the
// output's number of classes is an INVALID_ARGUMENT naming both.
// Thread-safety: pure functions.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/infer_request.h"
#include "core/model_spec.h"
#include "core/status.h"
#include "core/tensor.h"

namespace inferd {

// What can be checked before the model runs: every output requested with a
// count is numeric in the config and, where its dims are all known, has at
// least k classes.
Status CheckClassification(const ModelSpec& spec, const std::vector<RequestedOutput>& requested);

// Element i of a numeric tensor as a float (what classification prints).
float ValueAsFloat(const Tensor& t, int64_t i);
// Whether classification and rules can read `dt` (not BYTES or BOOL).
bool IsNumeric(DataType dt);
// The indices of the k largest of `values`, highest first; NaN last, equal
// values lower index first. REQUIRES: k <= values.size().
std::vector<int64_t> TopIndices(const std::vector<float>& values, size_t k);

// `t`'s top k per row (rows = t.shape[0] when `batched`, else one row of all
// of t). `labels` may be null.
Result<Tensor> Classify(const Tensor& t, uint32_t k, bool batched, const std::vector<std::string>* labels);

// What a request's answer needs to be classified, copied out of the spec so
// that it does not keep the model version alive.
struct Classification {
  struct Output {
    std::string name;
    uint32_t k = 0;
    std::shared_ptr<const std::vector<std::string>> labels;  // may be null
  };
  std::vector<Output> outputs;  // empty: nothing to classify
  bool batched = false;
};
Classification PlanClassification(const ModelSpec& spec, const std::vector<RequestedOutput>& requested);

// Replaces each output of `response` the plan names.
Status ApplyClassification(const Classification& plan, InferResponse* response);

}  // namespace inferd
