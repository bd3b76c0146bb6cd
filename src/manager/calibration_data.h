// Calibration data for the accuracy guard (quantization_guard.h): a file in
// the version folder (`calibration.json` unless the parameter
// `quantization.calibration` names another) holding the inputs of one or
// more KServe v2 inference requests, as a client would send them:
//
//   {"inputs": [{"name": "x", "datatype": "FP32", "shape": [4, 64], "data": [...]}]}
//   [ {"inputs": [...]}, {"inputs": [...]} ]
//
// Each request becomes one sample: one tensor per config input (spec
// order), its shape with the batch dimension when max_batch_size > 0 (up
// to max_batch_size rows), the data flat or nested, numbers (true/false for
// BOOL). The config's reshape is applied as for requests.
//
// Thread-safety: a pure function.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

#include "core/model_spec.h"
#include "core/status.h"
#include "manager/warmup.h"

namespace inferd {

inline constexpr size_t kMaxCalibrationBytes = size_t{64} << 20;
inline constexpr size_t kMaxCalibrationSamples = 4096;

// INVALID_ARGUMENT naming the request and input at fault: not JSON, too
// large, an input missing, unknown or given twice, a datatype or shape the
// config does not take, a value count that does not match the shape, a value
// the datatype cannot hold. BYTES inputs are not taken.
Result<std::vector<WarmupSample>> ParseCalibrationData(std::string_view text, const ModelSpec& spec);

}  // namespace inferd
