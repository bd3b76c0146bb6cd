// The accuracy guard's inputs (manager/quantization_guard.h,
// manager/calibration_data.h): `quantization.*` parameters and calibration
// files. The input is parameter lines ("key=value"), a NUL byte, then a
// calibration file read against a fixed spec (a batched FP32 [3] input, an
// INT64 [-1] input and an optional BOOL one). Invariants: no crash; every
// sample parsed has one tensor per input given, each with as many bytes as
// its shape and datatype say, at most max_batch_size rows.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>

#include "manager/calibration_data.h"
#include "manager/quantization_guard.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const size_t nul = in.find('\0');
  if (nul == std::string_view::npos) return 0;
  std::map<std::string, std::string> params;
  std::string_view lines = in.substr(0, nul);
  while (!lines.empty()) {
    const size_t end = std::min(lines.find('\n'), lines.size());
    const std::string_view line = lines.substr(0, end);
    const size_t eq = line.find('=');
    if (eq != std::string_view::npos) params[std::string(line.substr(0, eq))] = std::string(line.substr(eq + 1));
    lines.remove_prefix(std::min(end + 1, lines.size()));
  }
  auto options = inferd::ParseQuantizationOptions(params);
  if (options.ok() && (options->min_top1 < 0 || options->min_top1 > 1 || options->max_relative_error < 0)) std::abort();

  inferd::ModelSpec spec;
  spec.name = "m";
  spec.max_batch_size = 4;
  spec.inputs.push_back({"x", inferd::DataType::kFp32, {3}});
  spec.inputs.push_back({"ids", inferd::DataType::kInt64, {-1}});
  inferd::TensorSpec flag{"flag", inferd::DataType::kBool, {1}};
  flag.optional = true;
  spec.inputs.push_back(flag);
  auto samples = inferd::ParseCalibrationData(in.substr(nul + 1), spec);
  if (!samples.ok()) return 0;
  for (const auto& s : *samples) {
    if (s.inputs.size() < 2 || s.inputs.size() > 3) std::abort();
    for (const auto& t : s.inputs) {
      const int64_t n = t.element_count();
      if (n < 0 || t.bytes().size() != static_cast<size_t>(n) * inferd::DataTypeByteSize(t.dtype)) std::abort();
      if (t.shape.empty() || t.shape[0] < 1 || t.shape[0] > spec.max_batch_size) std::abort();
    }
  }
  return 0;
}
