// Load-time node fusion: rewrites a checked ONNX graph so that groups of
// nodes run as one kernel.
//
//   Conv -> Relu           one `ai.inferd` Conv with attribute activation =
//                          "Relu" (a post-op of the oneDNN convolution;
//                          ops/dnnl_conv.h)
//   MatMul -> Add(bias)    one `ai.inferd` Linear(x, W, bias) when W is a
//                          constant 2-D float matrix and bias a constant
//                          vector of its width (one oneDNN matmul with bias
//                          instead of a GEMM plus a broadcast add)
//
//   x*0.5*(1+Erf(x/sqrt 2))  one `ai.inferd` Gelu(x) (torch.nn.GELU's and
//                          Hugging Face's orders of the products)
//   ReduceMean Sub Pow ReduceMean Add Sqrt Div Mul Add
//                          one `ai.inferd` LayerNormalization(x, gamma,
//                          beta) over the last axis (exports below opset 17)
//   Linear -> Gelu         Linear with attribute activation = "Gelu" (a
//                          oneDNN post-op of the product; ops/dnnl_gemm.h)
//
// Nodes fuse only when every intermediate output is read by the pattern's
// next node alone (not by a graph output, another node or a subgraph), and
// the constants (scales, epsilon, gamma, beta, weights) are initializers or
// Constant nodes. The passes run in the order above, GELU and LayerNorm
// first. The rewritten graph imports domain `ai.inferd` version 1.
// Subgraphs are left as they are.
// Thread-safety: a pure function of its argument.
#pragma once

#include <onnx/onnx_pb.h>

namespace inferd::onnxexec {

inline constexpr const char* kInferdDomain = "ai.inferd";

struct FusionCounts {
  int conv_relu = 0;
  int matmul_add = 0;
  int gelu = 0;
  int layer_norm = 0;
  int linear_activation = 0;
  int total() const { return conv_relu + matmul_add + gelu + layer_norm + linear_activation; }
};

// Runs after the checker (the rewritten graph uses inferd's own domain).
FusionCounts FuseNodes(onnx::ModelProto* model);

}  // namespace inferd::onnxexec
