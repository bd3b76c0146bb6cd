#include "scheduler/spec_parameters.h"

#include <charconv>
#include <string>

namespace inferd {

Result<int64_t> IntParameter(const ModelSpec& spec, const char* name, int64_t lo, int64_t hi, int64_t fallback) {
  auto it = spec.parameters.find(name);
  if (it == spec.parameters.end()) return fallback;
  int64_t v = 0;
  const std::string& s = it->second;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < lo || v > hi) {
    return Status::InvalidArgument("parameter '" + std::string(name) + "' must be an integer in [" +
                                   std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  return v;
}

}  // namespace inferd
