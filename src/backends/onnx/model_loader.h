// Loading an ONNX model: parse the protobuf, read external data files,
// check the opset range, run ONNX's checker, compile the graph into a Plan.
// Thread-safety: pure functions (the op registry is read-only).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "backends/onnx/kernel.h"
#include "backends/onnx/plan.h"
#include "core/status.h"

namespace inferd::onnxexec {

// The default-domain opsets the executor implements: exporters emit 7 to 17;
// older models (opset 1 to 6: legacy attributes such as `broadcast` and
// `axis` on binary ops, `is_test`, `consumed_inputs`) load too.
inline constexpr int kMinOpset = 1;
inline constexpr int kMaxOpset = 17;

struct IoInfo {
  std::string name;
  int32_t elem_type = 0;      // onnx::TensorProto_DataType (0: not a tensor, or unknown)
  std::vector<int64_t> dims;  // -1 = dynamic
  bool has_shape = false;
  bool is_tensor = true;  // false for sequences, optionals, maps
};

struct OnnxModel {
  std::shared_ptr<const Plan> plan;
  std::vector<IoInfo> inputs;  // graph inputs the caller provides, in order
  std::vector<IoInfo> outputs;
  int opset = 0;                // default domain
  std::string producer;         // "pytorch 1.13.1"
  int fused = 0;                // node groups fused at load (fusion.h)
  QuantizationTally quantized;  // weights an int8 registry replaced
};

// `dir` resolves external data locations (relative paths inside it only).
// `fuse`: run fusion.h's rewrites (the registry must be an optimized one).
// INVALID_ARGUMENT / UNIMPLEMENTED with a message naming the node at fault.
Result<OnnxModel> LoadOnnxModel(std::string_view bytes, const std::string& dir, const OpRegistry& ops,
                                bool fuse = true);
Result<OnnxModel> LoadOnnxModelFile(const std::string& path, const OpRegistry& ops, bool fuse = true);

}  // namespace inferd::onnxexec
