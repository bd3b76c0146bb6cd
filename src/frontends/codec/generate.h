// Triton's generate extension (HTTP): a flat JSON object whose keys are the
// model's input names, plus optional "id" and "parameters"; the answer is a
// flat object with "model_name", "model_version" and one key per output.
// `/generate` answers once; `/generate_stream` answers each part as a
// server-sent event (frontends/http/generate_handlers.cc).
//
// JSON values carry no datatype, so parsing needs the model's inputs. Pure
// functions over bytes; fuzzed in fuzz/.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/infer_request.h"
#include "core/json_limits.h"
#include "core/status.h"

namespace inferd::generate {

// An input as in the model's metadata (shape: -1 = variable, the batch
// dimension included when batching).
using InputInfo = TensorMetadata;

// Reads a generate request in two steps. Now: the JSON, "id" and
// "parameters" (the routing may read them: a sticky-key parameter). Later, on
// the version that serves it: the inputs, by that version's declared inputs
// (the returned request's InferRequest::decode, which the request pipeline
// calls). Each input key's value (a string, number, bool or array of them)
// becomes a tensor of the input's datatype and the value's shape, with
// leading 1s added up to the input's rank (so "text_input": "hi" is a [1, 1]
// BYTES tensor for a batching model with dims [1]). Unknown keys are errors.
Result<std::unique_ptr<InferRequest>> ReadGenerateRequest(std::string_view body, std::string model_name,
                                                          std::string model_version, const JsonLimits& limits = {});
// Both steps at once, by `inputs` (tests, fuzzing).
Result<std::unique_ptr<InferRequest>> ParseGenerateRequest(std::string_view body, const std::vector<InputInfo>& inputs,
                                                           std::string model_name, std::string model_version);

// {"model_name":..,"model_version":..,"<output>":value,...}: a one-element
// output is a scalar, others a flat array; BYTES are strings.
std::string EncodeGenerateResponse(const InferResponse& response);

}  // namespace inferd::generate
