// The executor's oneDNN kernels (libdnnl called directly; dnnl_conv.h,
// dnnl_gemm.h), registered over the standard ATen ones by
// MakeOpRegistry(optimized = true):
//
//  - Conv with a float constant weight: a oneDNN convolution packed at load
//    (Winograd for 3x3 stride-1 layers where oneDNN has it), bias and a
//    fused ReLU (fusion.h: domain ai.inferd, attribute `activation`) inside
//    the primitive; plain NCHW tensors in and out.
//  - MaxPool (2-D, floor rounding): oneDNN's pooling.
//  - MatMul and Gemm on constant weights, and the fused Linear (MatMul +
//    bias [+ GELU]): oneDNN matmuls on weights packed at load; MatMul of two
//    computed tensors as one batched matmul.
//  - The fused Gelu and LayerNormalization (fusion.h).
//
// Each keeps the standard kernel for what oneDNN does not take (other
// dtypes and ranks, asymmetric pads, dilated or ceil-mode pooling, indices).
#include <ATen/ATen.h>

#include <functional>
#include <optional>
#include <utility>

#include "backends/onnx/ops/conv_node.h"
#include "backends/onnx/ops/dnnl_conv.h"
#include "backends/onnx/ops/dnnl_gemm.h"
#include "backends/onnx/ops/linear_kernel.h"
#include "backends/onnx/ops/op_util.h"

namespace inferd::onnxexec::ops {
namespace {

using Args = const std::vector<const Value*>&;
using Outs = std::vector<Value>&;

// Attribute values oneDNN is handed (beyond them the standard kernel runs).
constexpr int64_t kMaxWindow = 1 << 16;

bool InRange(const std::vector<int64_t>& v, int64_t lo) {
  for (int64_t x : v)
    if (x < lo || x > kMaxWindow) return false;
  return true;
}

// A 2-D Conv with a float constant weight (and bias) as a oneDNN
// convolution packed at load (dnnl_conv.h); nullopt when it cannot be.
std::optional<std::shared_ptr<const PackedConv2d>> Packable(const NodeInfo& n, bool relu, bool winograd) {
  auto conv = ConstantConvOf(n, relu, winograd);
  if (!conv) return std::nullopt;
  return PackedConv2d::Make(conv->weight, conv->bias, conv->geometry);
}

// A 2-D Conv with a float constant weight: packed at load, run by oneDNN.
Result<Compiled> PackedConv(const Builder& standard, const NodeInfo& n, bool winograd) {
  const std::string activation = n.String("activation", "");
  if (!activation.empty() && activation != "Relu") return n.Error("unknown fused activation '" + activation + "'");
  auto pack = Packable(n, !activation.empty(), winograd);
  if (!pack) {
    INFERD_ASSIGN_OR_RETURN(Compiled c, standard(n));
    if (activation.empty()) return c;
    c.kernel = [conv = std::move(c.kernel)](Args in, Outs out) -> Status {
      INFERD_RETURN_IF_ERROR(conv(in, out));
      out[0] = Value::Of(at::relu(out[0].tensor()));
      return Status::OK();
    };
    return c;
  }
  Compiled c = Make([p = std::move(*pack)](Args in, Outs out) -> Status {
    INFERD_ASSIGN_OR_RETURN(at::Tensor x, In(in, 0));
    INFERD_ASSIGN_OR_RETURN(at::Tensor y, p->Run(x));
    out[0] = Value::Of(std::move(y));
    return Status::OK();
  });
  c.baked_inputs = {1, 2};
  return c;
}

// x [..., K] times a constant [K, N] float matrix (plus a constant [N]
// bias, then the epilogue) as one oneDNN matmul on weights packed at load
// (dnnl_gemm.h). nullopt when the weight or bias is not such a constant.
std::optional<Kernel> PackedLinear(const Value* w, const Value* b, bool transposed, Epilogue epilogue) {
  if (!w || !w->is_tensor() || (b && !b->is_tensor())) return std::nullopt;
  auto gemm = PackedGemm::Make(w->tensor(), transposed, b ? b->tensor() : at::Tensor(), epilogue);
  if (!gemm) return std::nullopt;
  return LinearKernel(std::move(*gemm));
}

// `c` with `fast` tried first: it answers the node's one output, or nullopt
// for an input it does not take (then `c`'s own kernel runs).
using FastPath = std::function<std::optional<Result<at::Tensor>>(Args in)>;
Compiled Preferring(Compiled c, FastPath fast) {
  c.kernel = [standard = std::move(c.kernel), fast = std::move(fast)](Args in, Outs out) -> Status {
    if (auto y = fast(in)) {
      INFERD_RETURN_IF_ERROR(y->status());
      out[0] = Value::Of(std::move(y->value()));
      return Status::OK();
    }
    return standard(in, out);
  };
  return c;
}

Result<Epilogue> EpilogueOf(const NodeInfo& n) {
  const std::string a = n.String("activation", "");
  if (a.empty()) return Epilogue::kNone;
  if (a == "Gelu") return Epilogue::kGeluErf;
  return n.Error("unknown fused activation '" + a + "'");
}

}  // namespace

std::optional<ConstantConv> ConstantConvOf(const NodeInfo& n, bool relu, bool winograd) {
  const Value* w = n.constant(1);
  if (!w || !w->is_tensor()) return std::nullopt;
  const at::Tensor& wt = w->tensor();
  if (wt.scalar_type() != at::kFloat || wt.dim() != 4) return std::nullopt;
  for (int64_t d : wt.sizes())
    if (d < 1 || d > kMaxWindow) return std::nullopt;
  ConstantConv out;
  out.weight = wt;
  if (n.has_input(2)) {
    const Value* b = n.constant(2);
    if (!b || !b->is_tensor()) return std::nullopt;
    out.bias = b->tensor();
  }
  const std::string auto_pad = n.String("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID" && !auto_pad.empty()) return std::nullopt;
  std::vector<int64_t> pads = n.Ints("pads");
  const std::vector<int64_t> kernel = n.Ints("kernel_shape");
  std::vector<int64_t> strides = n.Ints("strides"), dilations = n.Ints("dilations");
  if (pads.empty() || auto_pad == "VALID") pads.assign(4, 0);
  if (strides.empty()) strides.assign(2, 1);
  if (dilations.empty()) dilations.assign(2, 1);
  if (pads.size() != 4 || strides.size() != 2 || dilations.size() != 2 || !SymmetricPads(pads) || !InRange(pads, 0) ||
      !InRange(strides, 1) || !InRange(dilations, 1)) {
    return std::nullopt;
  }
  if (!kernel.empty() && kernel != std::vector<int64_t>{wt.size(2), wt.size(3)}) return std::nullopt;
  ConvGeometry& g = out.geometry;
  g.groups = n.Int("group", 1);
  if (g.groups < 1 || wt.size(0) % g.groups != 0) return std::nullopt;
  g.strides = {strides[0], strides[1]};
  g.dilations = {dilations[0], dilations[1]};
  g.padding = {pads[0], pads[1]};
  g.relu = relu;
  g.winograd = winograd;
  return out;
}

void RegisterMkldnnOps(OpRegistry& r, bool winograd) {
  // Copies of the standard builders the wrappers fall back to.
  const Builder conv = *r.Find("", "Conv"), max_pool = *r.Find("", "MaxPool");
  r.Add("", "Conv", [conv, winograd](const NodeInfo& n) { return PackedConv(conv, n, winograd); });
  r.Add("ai.inferd", "Conv", [conv, winograd](const NodeInfo& n) { return PackedConv(conv, n, winograd); });
  // MatMul -> Add fused by fusion.h; MatMul and Gemm on constant weights.
  const Builder matmul = *r.Find("", "MatMul"), gemm = *r.Find("", "Gemm");
  r.Add("ai.inferd", "Linear", [](const NodeInfo& n) -> Result<Compiled> {
    if (n.num_inputs() != 3) return n.Error("Linear takes x, W and bias");
    // fusion.h makes Linear only of a constant float [K >= 1, N >= 1] weight and [N] bias.
    INFERD_ASSIGN_OR_RETURN(Epilogue epilogue, EpilogueOf(n));
    auto k = PackedLinear(n.constant(1), n.constant(2), false, epilogue);
    if (!k) return n.Error("Linear needs a constant float weight and bias");
    Compiled c = Make(std::move(*k));
    c.baked_inputs = {1, 2};
    return c;
  });
  // GELU and LayerNorm subgraphs fused by fusion.h.
  r.Add("ai.inferd", "Gelu", [](const NodeInfo&) -> Result<Compiled> {
    return Make([](Args in, Outs out) -> Status {
      INFERD_ASSIGN_OR_RETURN(at::Tensor x, In(in, 0));
      if (!IsFloating(x)) return Status::InvalidArgument("Gelu takes a floating-point input");
      out[0] = Value::Of(at::gelu(x));
      return Status::OK();
    });
  });
  r.Add("ai.inferd", "LayerNormalization", *r.Find("", "LayerNormalization"));
  r.Add("", "MatMul", [matmul](const NodeInfo& n) -> Result<Compiled> {
    if (n.num_inputs() == 2 && n.constant(0) == nullptr) {
      if (auto k = PackedLinear(n.constant(1), nullptr, false, Epilogue::kNone)) {
        Compiled c = Make(std::move(*k));
        c.baked_inputs = {1};
        return c;
      }
    }
    // Products of two computed values (attention's scores and context):
    // one batched oneDNN matmul where the shapes allow, else ATen's.
    INFERD_ASSIGN_OR_RETURN(Compiled c, matmul(n));
    return Preferring(
        std::move(c),
        [batched = std::make_shared<const BatchedMatMul>()](Args in) -> std::optional<Result<at::Tensor>> {
          if (in.size() != 2 || !in[0] || !in[1] || !in[0]->is_tensor() || !in[1]->is_tensor()) return std::nullopt;
          return batched->Run(in[0]->tensor(), in[1]->tensor());
        });
  });
  r.Add("", "Gemm", [gemm](const NodeInfo& n) -> Result<Compiled> {
    // Y = A B' + C with A [M, K], a constant B and a constant C of width N.
    const bool plain = n.Float("alpha", 1.0f) == 1.0f && n.Float("beta", 1.0f) == 1.0f && n.Int("transA", 0) == 0;
    if (plain && n.constant(0) == nullptr && (n.num_inputs() == 2 || (n.num_inputs() == 3 && n.constant(2)))) {
      const bool trans_b = n.Int("transB", 0) != 0;
      if (auto k =
              PackedLinear(n.constant(1), n.num_inputs() == 3 ? n.constant(2) : nullptr, trans_b, Epilogue::kNone)) {
        Kernel gemm2d = [k = std::move(*k)](Args in, Outs out) -> Status {
          INFERD_ASSIGN_OR_RETURN(at::Tensor a, In(in, 0));
          if (a.dim() != 2) return Status::InvalidArgument("Gemm takes a 2-D A");
          return k(in, out);
        };
        Compiled c = Make(std::move(gemm2d));
        c.baked_inputs = {1, 2};
        return c;
      }
    }
    return gemm(n);
  });
  r.Add("", "MaxPool", [max_pool](const NodeInfo& n) -> Result<Compiled> {
    std::vector<int64_t> kernel = n.Ints("kernel_shape"), strides = n.Ints("strides"), pads = n.Ints("pads");
    const std::vector<int64_t> dilations = n.Ints("dilations");
    const std::string auto_pad = n.String("auto_pad", "NOTSET");
    if (pads.empty()) pads.assign(4, 0);
    if (strides.empty()) strides = {1, 1};
    const bool ok = kernel.size() == 2 && strides.size() == 2 && pads.size() == 4 && SymmetricPads(pads) &&
                    (dilations.empty() || dilations == std::vector<int64_t>{1, 1}) && !n.has_output(1) &&
                    (auto_pad == "NOTSET" || auto_pad.empty()) && InRange(kernel, 1) && InRange(strides, 1) &&
                    InRange(pads, 0) && 2 * pads[0] <= kernel[0] && 2 * pads[1] <= kernel[1] &&
                    n.Int("ceil_mode", 0) == 0 && n.Int("storage_order", 0) == 0;
    INFERD_ASSIGN_OR_RETURN(Compiled c, max_pool(n));
    if (!ok) return c;
    auto pool = std::make_shared<const MaxPool2d>(std::array<int64_t, 2>{kernel[0], kernel[1]},
                                                  std::array<int64_t, 2>{strides[0], strides[1]},
                                                  std::array<int64_t, 2>{pads[0], pads[1]});
    // Not a float NCHW input, or a window that does not fit: the standard kernel (which says so).
    return Preferring(std::move(c), [pool](Args in) -> std::optional<Result<at::Tensor>> {
      if (!Present(in, 0) || !in[0]->is_tensor()) return std::nullopt;
      return pool->Run(in[0]->tensor());
    });
  });
}

}  // namespace inferd::onnxexec::ops
