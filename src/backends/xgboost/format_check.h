// Checks of a model file's bytes before libxgboost parses them.
//
// libxgboost (1.7) trusts the sizes inside a model file: its UBJSON reader
// copies a string of the length the file states without looking at how many
// bytes are left, and its legacy binary reader resizes vectors to stated
// lengths before reading them (a 4-byte field can ask for gigabytes of zeroed
// memory). These checks walk the containers and lengths with bounds, so the
// library only ever sees files whose every stated size fits in the file.
// JSON and UBJSON documents are then checked for what the library's model
// reader assumes (model_check.h): it indexes arrays by counts stated
// elsewhere in the document. Fuzzed (fuzz_xgboost_model).
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"

namespace inferd::xgboost {

enum class ModelFormat { kJson, kUbjson, kLegacyBinary };

// By content: '{' + '"' (after whitespace) is JSON, '{' + a type marker is
// UBJSON, anything else the legacy binary format.
ModelFormat DetectFormat(std::string_view bytes);

// INVALID_ARGUMENT with the offset of the first fault.
Status CheckJsonText(std::string_view bytes);
// The document as JSON text, for CheckModelJson (numbers need not
// round-trip exactly: the library still parses the original bytes).
Result<std::string> UbjsonToJson(std::string_view bytes);
Status CheckLegacyBinary(std::string_view bytes);

}  // namespace inferd::xgboost
