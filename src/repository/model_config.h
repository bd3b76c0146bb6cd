// Parsing and validation of Triton-style model configurations.
//
// config.pbtxt is protobuf text format of inferd.config.ModelConfig
// (proto/model_config.proto, field-compatible with Triton). This header keeps
// protobuf types out of its interface: callers get a ModelSpec or an error
// whose message names the file and the offending field.
//
// Thread-safety: free functions without shared state.
#pragma once

#include <string>
#include <string_view>

#include "core/model_spec.h"
#include "core/status.h"

namespace inferd {

// Parses `text` (protobuf text format) and validates it into a ModelSpec.
// `model_name` is the repository directory name; a config `name` that
// differs is an error, an empty one is filled in. `source` names the file in
// error messages. Inputs may be left empty for backends to auto-complete;
// call ValidateSpec after completion.
Result<ModelSpec> ParseModelConfig(std::string_view text, std::string_view model_name, std::string_view source);

// Converts a JSON ModelConfig (KServe load "parameters.config") to text format.
Result<std::string> ModelConfigJsonToText(std::string_view json);

// Checks a complete spec: inputs present, names unique, dims valid, batching
// sizes consistent. `source` names the file in messages.
Status ValidateSpec(const ModelSpec& spec, std::string_view source);

// Renders the config as JSON (proto3 JSON mapping) for the config endpoint:
// the original text with name/backend/inputs/outputs filled in from `spec`.
std::string RenderModelConfigJson(std::string_view original_text, const ModelSpec& spec);

}  // namespace inferd
