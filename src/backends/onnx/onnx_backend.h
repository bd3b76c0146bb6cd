// The ONNX backend: <version>/model.onnx run by inferd's own executor over
// libtorch's ATen kernels (backends/onnx/plan.h), with Triton's names:
// `platform: "onnxruntime_onnx"` or `backend: "onnxruntime"` (alias "onnx").
//
// Config auto-complete: inputs and outputs (names, datatypes, dims) from the
// graph; when every input and output has a dynamic first dimension and the
// model has no config.pbtxt, that dimension becomes the batch dimension
// (max_batch_size 32, dynamic batching on). Instances share the compiled
// plan; each runs with its own intra-op thread count (INTRA_OP_THREAD_COUNT).
#pragma once

#include <memory>

#include "backends/backend.h"

namespace inferd {

std::unique_ptr<Backend> MakeOnnxBackend();
Status RegisterOnnxBackend(BackendRegistry* registry);

}  // namespace inferd
