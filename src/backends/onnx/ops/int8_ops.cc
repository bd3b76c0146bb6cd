// Int8 kernels of models quantised at load time (MakeOpRegistry(int8 =
// true): model parameter `quantization: "int8"`), registered over the oneDNN
// ones (mkldnn.cc):
//
//  - Conv (2-D, constant weights; inferd's fused Conv + ReLU too): oneDNN's
//    int8 convolution (aten/int8_conv.h).
//  - MatMul with a constant float [K, N] B, Gemm (alpha = beta = 1, no
//    transA) with a constant B and bias, and the fused Linear (MatMul + bias
//    [+ GELU]): int8 products (int8_linear.h), the weights quantised per
//    output channel once, the activations per row at each call.
//
// Everything else, and what these do not take, builds as before. Each
// replaced weight is counted (NodeInfo::CountQuantized: the load's note and
// the accuracy guard's report).
#include <ATen/ATen.h>

#include <utility>

#include "backends/aten/int8_conv.h"
#include "backends/aten/int8_linear.h"
#include "backends/onnx/ops/conv_node.h"
#include "backends/onnx/ops/linear_kernel.h"
#include "backends/onnx/ops/op_util.h"

namespace inferd::onnxexec::ops {
namespace {

using Args = const std::vector<const Value*>&;
using Outs = std::vector<Value>&;

// x [..., K] times the constant weight: the int8 product; nullopt when `w`
// (or `b`) is not a constant float matrix (vector) of the right shape.
std::optional<Kernel> Int8Kernel(const NodeInfo& n, const Value* w, const Value* b, bool transposed,
                                 Epilogue epilogue) {
  if (!w || !w->is_tensor() || (b && !b->is_tensor())) return std::nullopt;
  auto lin =
      aten::Int8Linear::Make(w->tensor(), transposed, b ? b->tensor() : at::Tensor(),
                             epilogue == Epilogue::kGeluErf ? aten::Int8Epilogue::kGeluErf : aten::Int8Epilogue::kNone);
  if (!lin) return std::nullopt;
  n.CountQuantized((*lin)->float_bytes(), (*lin)->bytes());
  return LinearKernel(std::move(*lin));
}

Compiled Baked(Kernel k, std::vector<size_t> baked) {
  Compiled c = Make(std::move(k));
  c.baked_inputs = std::move(baked);
  return c;
}

// A 2-D Conv (or inferd's Conv + ReLU) with constant weights as oneDNN's int8 convolution; else `previous`.
Result<Compiled> Int8Conv(const Builder& previous, const NodeInfo& n) {
  const std::string activation = n.String("activation", "");
  if (activation.empty() || activation == "Relu") {
    if (auto conv = ConstantConvOf(n, !activation.empty(), /*winograd=*/false)) {
      if (auto q = aten::Int8Conv2d::Make(conv->weight, conv->bias, conv->geometry)) {
        n.CountQuantized((*q)->float_bytes(), (*q)->bytes());
        return Baked(
            [q = std::move(*q)](Args in, Outs out) -> Status {
              INFERD_ASSIGN_OR_RETURN(at::Tensor x, In(in, 0));
              INFERD_ASSIGN_OR_RETURN(at::Tensor y, q->Run(x));
              out[0] = Value::Of(std::move(y));
              return Status::OK();
            },
            {1, 2});
      }
    }
  }
  return previous(n);
}

}  // namespace

void RegisterInt8Ops(OpRegistry& r) {
  for (const char* domain : {"", "ai.inferd"}) {
    r.Add(domain, "Conv", [previous = *r.Find(domain, "Conv")](const NodeInfo& n) { return Int8Conv(previous, n); });
  }
  const Builder matmul = *r.Find("", "MatMul"), gemm = *r.Find("", "Gemm"), linear = *r.Find("ai.inferd", "Linear");
  r.Add("ai.inferd", "Linear", [linear](const NodeInfo& n) -> Result<Compiled> {
    const std::string a = n.String("activation", "");
    if (n.num_inputs() == 3 && (a.empty() || a == "Gelu")) {
      if (auto k = Int8Kernel(n, n.constant(1), n.constant(2), false, a.empty() ? Epilogue::kNone : Epilogue::kGeluErf))
        return Baked(std::move(*k), {1, 2});
    }
    return linear(n);
  });
  r.Add("", "MatMul", [matmul](const NodeInfo& n) -> Result<Compiled> {
    if (n.num_inputs() == 2 && n.constant(0) == nullptr) {
      if (auto k = Int8Kernel(n, n.constant(1), nullptr, false, Epilogue::kNone)) return Baked(std::move(*k), {1});
    }
    return matmul(n);
  });
  r.Add("", "Gemm", [gemm](const NodeInfo& n) -> Result<Compiled> {
    const bool plain = n.Float("alpha", 1.0f) == 1.0f && n.Float("beta", 1.0f) == 1.0f && n.Int("transA", 0) == 0;
    if (plain && n.constant(0) == nullptr && (n.num_inputs() == 2 || (n.num_inputs() == 3 && n.constant(2)))) {
      if (auto k = Int8Kernel(n, n.constant(1), n.num_inputs() == 3 ? n.constant(2) : nullptr, n.Int("transB", 0) != 0,
                              Epilogue::kNone)) {
        return Baked(
            [k = std::move(*k)](Args in, Outs out) -> Status {
              INFERD_ASSIGN_OR_RETURN(at::Tensor a, In(in, 0));
              if (a.dim() != 2) return Status::InvalidArgument("Gemm takes a 2-D A");
              return k(in, out);
            },
            {1, 2});
      }
    }
    return gemm(n);
  });
}

}  // namespace inferd::onnxexec::ops
