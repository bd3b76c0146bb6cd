// Load-time node fusion: rewrites a checked ONNX graph so that pairs of
// nodes run as one kernel.
//
//   Conv -> Relu           one `ai.inferd` Conv with attribute activation =
//                          "Relu" (the ReLU runs in place on the convolution's
//                          own output; ops/mkldnn.cc)
//   MatMul -> Add(bias)    one `ai.inferd` Linear(x, W, bias) when W is a
//                          constant 2-D float matrix and bias a constant
//                          vector of its width (one pre-packed oneDNN inner
//                          product instead of a GEMM plus a broadcast add)
//
// A pair fuses only when the first node's output is read by the second node
// alone (not by a graph output, another node or a subgraph). The rewritten
// graph imports domain `ai.inferd` version 1. Subgraphs are left as they are.
// Thread-safety: a pure function of its argument.
#pragma once

#include <onnx/onnx_pb.h>

namespace inferd::onnxexec {

inline constexpr const char* kInferdDomain = "ai.inferd";

struct FusionCounts {
  int conv_relu = 0;
  int matmul_add = 0;
  int total() const { return conv_relu + matmul_add; }
};

// Runs after the checker (the rewritten graph uses inferd's own domain).
FusionCounts FuseNodes(onnx::ModelProto* model);

}  // namespace inferd::onnxexec
