#include "server/load_parameters.h"

namespace inferd {

Result<std::optional<std::string>> ConfigFromLoadParameters(const std::vector<LoadParameter>& params) {
  std::optional<std::string> config;
  for (const auto& p : params) {
    if (p.key == "config") {
      if (!p.is_string)
        return Status::InvalidArgument("parameter 'config' must be a string holding a JSON model config");
      config = p.string_value;
    } else if (p.key.rfind("file:", 0) == 0) {
      return Status::Unimplemented("loading model files from the request ('" + p.key + "') is not supported");
    }
  }
  return config;
}

}  // namespace inferd
