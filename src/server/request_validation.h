// Validation of a decoded request against the model it addresses, before it
// is queued: names, datatypes, shapes, batch sizes, requested outputs.
// On success the inputs are reordered to ModelSpec::inputs order and the
// request's batch size (rows) is returned.
#pragma once

#include "core/infer_request.h"
#include "core/model_spec.h"
#include "core/status.h"

namespace inferd {

Result<int64_t> ValidateAndNormalize(const ModelSpec& spec, InferRequest* request);

// Reads the "priority" and "timeout" request parameters into the request.
Status ApplySchedulingParameters(InferRequest* request);

}  // namespace inferd
