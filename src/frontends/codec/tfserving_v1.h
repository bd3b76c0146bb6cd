// TensorFlow Serving v1 REST codec (:predict): row ("instances") and columnar
// ("inputs") request forms and their responses ("predictions" / "outputs").
//
// JSON numbers carry no datatype, so parsing needs the model's input names
// and datatypes. Pure functions over bytes; fuzzed in fuzz/.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/infer_request.h"
#include "core/json_limits.h"
#include "core/status.h"

namespace inferd::v1 {

// An input as in the model's metadata (the name and datatype are read).
using InputInfo = TensorMetadata;

enum class Format { kRow, kColumnar };

struct PredictRequest {
  std::unique_ptr<InferRequest> request;
  Format format = Format::kRow;
};

// Reads a :predict body in two steps. Now: the JSON and its form. Later, on
// the version that serves it: the inputs, by that version's declared inputs
// (the request's InferRequest::decode, which the request pipeline calls).
Result<PredictRequest> ReadPredictRequest(std::string_view body, std::string model_name, std::string model_version,
                                          const JsonLimits& limits = {});
// Both steps at once, by `inputs` (tests, fuzzing).
Result<PredictRequest> ParsePredictRequest(std::string_view body, const std::vector<InputInfo>& inputs,
                                           std::string model_name, std::string model_version);

// {"predictions": ...} for kRow, {"outputs": ...} for kColumnar. A single
// output drops its name.
Result<std::string> EncodePredictResponse(const InferResponse& response, Format format);

}  // namespace inferd::v1
