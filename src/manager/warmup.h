// model_warmup: builds the warm-up input tensors a config describes and runs
// them on a model instance. A version is not READY until every instance has
// run every warm-up sample `count` times without error.
//
// Thread-safety: BuildWarmupSamples is a pure function; RunWarmup runs on the
// instance's worker thread (it calls Execute).
#pragma once

#include <string>
#include <vector>

#include "backends/backend.h"
#include "core/model_spec.h"
#include "core/status.h"
#include "core/tensor.h"
#include "repository/filesystem.h"

namespace inferd {

struct WarmupSample {
  std::string name;
  uint32_t count = 1;
  std::vector<Tensor> inputs;  // in spec.inputs order, batch dimension added, reshape applied
};

// `model_dir` (in `fs`, the repository's) holds the warmup/ folder that
// input_data_file names refer to. Fails when a sample misses a model input,
// names an unknown one, or has the wrong datatype or a file of the wrong size.
Result<std::vector<WarmupSample>> BuildWarmupSamples(const ModelSpec& spec, const Filesystem& fs,
                                                     const std::string& model_dir);

Status RunWarmup(ModelInstance& instance, const std::vector<WarmupSample>& samples);

}  // namespace inferd
