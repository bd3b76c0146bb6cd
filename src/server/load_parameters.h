// The parameters of a repository load call (KServe v2 / Triton's model
// repository extension), one policy for HTTP and gRPC:
//   "config"       a JSON model config that replaces config.pbtxt (a string)
//   "file:<path>"  model files sent in the request: UNIMPLEMENTED
// Other keys are ignored, as Triton ignores load parameters it does not use.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace inferd {

struct LoadParameter {
  std::string key;
  bool is_string = false;  // the value is a string (else: another JSON / proto type)
  std::string string_value;
};

// The "config" parameter's JSON when there is one.
Result<std::optional<std::string>> ConfigFromLoadParameters(const std::vector<LoadParameter>& params);

}  // namespace inferd
