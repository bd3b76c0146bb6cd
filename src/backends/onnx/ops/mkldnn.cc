// Convolutional chains in oneDNN's own layout, as torch.jit's
// optimize_for_inference runs them.
//
// A 2-D Conv whose weight is a float constant is pre-packed at load: the
// weight is reordered once into oneDNN's blocked format
// (mkldnn_reorder_conv2d_weight) and the kernel runs mkldnn_convolution,
// leaving its output in that opaque layout (at::kMkldnn). Relu, Add, MaxPool
// and GlobalAveragePool then run on such tensors directly, so a ResNet-style
// chain converts its input once and its result once instead of reordering
// around every convolution. Every other kernel gets dense copies (the plan
// converts; plan.cc). A Conv node that the fusion pass merged with the Relu
// after it (fusion.h: domain ai.inferd, attribute `activation`) applies the
// ReLU in place on its own output.
//
// Matrix products: MatMul and Gemm on constant weights, and the fused
// Linear (MatMul + bias [+ GELU]), run as oneDNN matmuls on weights packed at
// load; MatMul of two computed tensors as one batched matmul (dnnl_gemm.h).
// The fused Gelu and LayerNormalization (fusion.h) are registered here too.
//
// Each wrapper keeps the standard kernel for what oneDNN does not take
// (other dtypes and ranks, asymmetric pads, dilated pooling, indices).
#include <ATen/ATen.h>

#include <functional>
#include <optional>
#include <utility>

#include "backends/onnx/ops/dnnl_gemm.h"
#include "backends/onnx/ops/op_util.h"

namespace inferd::onnxexec::ops {
namespace {

using Args = const std::vector<const Value*>&;
using Outs = std::vector<Value>&;

bool AllMkldnn(Args in) {
  for (const Value* v : in)
    if (v && !IsMkldnn(*v)) return false;
  return !in.empty() && in[0] != nullptr;
}

// The standard builder of (domain "", op), and a kernel that takes the fast
// path when `fast` says it handled the call.
using Fast = std::function<Result<bool>(Args in, Outs out)>;

Result<Compiled> Wrap(const Builder& standard, const NodeInfo& n, Fast fast) {
  INFERD_ASSIGN_OR_RETURN(Compiled c, standard(n));
  if (!c.implicit_inputs.empty() || !c.grad_inputs.empty()) return c;
  c.accepts_mkldnn = true;
  c.kernel = [slow = std::move(c.kernel), fast = std::move(fast)](Args in, Outs out) -> Status {
    if (AllMkldnn(in)) {
      INFERD_ASSIGN_OR_RETURN(bool done, fast(in, out));
      if (done) return Status::OK();
    }
    std::vector<Value> dense;
    return slow(DenseArgs(in, &dense), out);
  };
  return c;
}

// Attribute values oneDNN is handed (beyond them the standard kernel runs).
constexpr int64_t kMaxWindow = 1 << 16;

bool InRange(const std::vector<int64_t>& v, int64_t lo) {
  for (int64_t x : v)
    if (x < lo || x > kMaxWindow) return false;
  return true;
}

// What a 2-D Conv needs to be pre-packed; nullopt when it cannot be.
struct ConvPack {
  at::Tensor weight;
  c10::optional<at::Tensor> bias;
  std::vector<int64_t> padding, strides, dilations;
  int64_t group = 1;
};

std::optional<ConvPack> Packable(const NodeInfo& n) {
  const Value* w = n.constant(1);
  if (!w || !w->is_tensor()) return std::nullopt;
  const at::Tensor& wt = w->tensor();
  if (wt.scalar_type() != at::kFloat || wt.dim() != 4) return std::nullopt;
  for (int64_t d : wt.sizes())
    if (d < 1 || d > kMaxWindow) return std::nullopt;
  ConvPack p;
  if (n.has_input(2)) {
    const Value* b = n.constant(2);
    if (!b || !b->is_tensor() || b->tensor().scalar_type() != at::kFloat || b->tensor().dim() != 1 ||
        b->tensor().size(0) != wt.size(0)) {
      return std::nullopt;
    }
    p.bias = b->tensor().contiguous();
  }
  const std::string auto_pad = n.String("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID" && !auto_pad.empty()) return std::nullopt;
  std::vector<int64_t> pads = n.Ints("pads");
  const std::vector<int64_t> kernel = n.Ints("kernel_shape");
  p.strides = n.Ints("strides");
  p.dilations = n.Ints("dilations");
  if (pads.empty() || auto_pad == "VALID") pads.assign(4, 0);
  if (p.strides.empty()) p.strides.assign(2, 1);
  if (p.dilations.empty()) p.dilations.assign(2, 1);
  if (pads.size() != 4 || p.strides.size() != 2 || p.dilations.size() != 2 || !SymmetricPads(pads) ||
      !InRange(pads, 0) || !InRange(p.strides, 1) || !InRange(p.dilations, 1)) {
    return std::nullopt;
  }
  if (!kernel.empty() && kernel != std::vector<int64_t>{wt.size(2), wt.size(3)}) return std::nullopt;
  p.group = n.Int("group", 1);
  if (p.group < 1 || wt.size(0) % p.group != 0) return std::nullopt;
  p.padding = {pads[0], pads[1]};
  p.weight = at::mkldnn_reorder_conv2d_weight(wt.contiguous().to_mkldnn(), p.padding, p.strides, p.dilations, p.group);
  return p;
}

// A 2-D Conv with a float constant weight: pre-packed, run in oneDNN layout.
Result<Compiled> PackedConv(const Builder& standard, const NodeInfo& n) {
  const std::string activation = n.String("activation", "");
  if (!activation.empty() && activation != "Relu") return n.Error("unknown fused activation '" + activation + "'");
  std::optional<ConvPack> pack = Packable(n);
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
  const int64_t in_channels = pack->weight.size(1) * pack->group;
  const int64_t kh = pack->weight.size(2), kw = pack->weight.size(3);
  Compiled c;
  c.accepts_mkldnn = true;
  c.baked_inputs = {1, 2};
  c.kernel = [p = std::move(*pack), in_channels, kh, kw, relu = !activation.empty()](Args in, Outs out) -> Status {
    INFERD_ASSIGN_OR_RETURN(at::Tensor x, In(in, 0));
    if (x.scalar_type() != at::kFloat || x.dim() != 4 || x.size(1) != in_channels) {
      return Status::InvalidArgument("Conv takes a float [N, " + std::to_string(in_channels) +
                                     ", H, W] input here, got " + std::string(c10::toString(x.scalar_type())) + " " +
                                     c10::str(x.sizes()));
    }
    const int64_t k[2] = {kh, kw};
    for (int d = 0; d < 2; ++d) {
      if (x.size(2 + d) + 2 * p.padding[d] < p.dilations[d] * (k[d] - 1) + 1) {
        return Status::InvalidArgument("Conv input " + c10::str(x.sizes()) + " is smaller than its kernel");
      }
    }
    if (x.numel() == 0) return Status::InvalidArgument("Conv of an empty input");
    at::Tensor xm = x.is_mkldnn() ? x : x.contiguous().to_mkldnn();
    at::Tensor y = at::mkldnn_convolution(xm, p.weight, p.bias, p.padding, p.strides, p.dilations, p.group);
    if (relu) at::relu_(y);
    out[0] = Value::Of(std::move(y));
    return Status::OK();
  };
  return c;
}

// x [..., K] times a constant [K, N] float matrix (plus a constant [N]
// bias, then the epilogue) as one oneDNN matmul on weights packed at load
// (dnnl_gemm.h). nullopt when the weight or bias is not such a constant.
std::optional<Kernel> PackedLinear(const Value* w, const Value* b, bool transposed, Epilogue epilogue) {
  if (!w || !w->is_tensor() || (b && !b->is_tensor())) return std::nullopt;
  auto gemm = PackedGemm::Make(w->tensor(), transposed, b ? b->tensor() : at::Tensor(), epilogue);
  if (!gemm) return std::nullopt;
  return Kernel([g = std::move(*gemm)](Args in, Outs out) -> Status {
    INFERD_ASSIGN_OR_RETURN(at::Tensor x, In(in, 0));
    const int64_t k = g->k();
    if (x.scalar_type() != at::kFloat || x.dim() < 1 || x.size(-1) != k) {
      return Status::InvalidArgument("takes a float [..., " + std::to_string(k) + "] input here, got " +
                                     std::string(c10::toString(x.scalar_type())) + " " + c10::str(x.sizes()));
    }
    std::vector<int64_t> shape = x.sizes().vec();
    shape.back() = g->n();
    if (x.numel() == 0) {
      out[0] = Value::Of(at::zeros(shape, x.options()));
      return Status::OK();
    }
    INFERD_ASSIGN_OR_RETURN(at::Tensor y, g->Run(x.reshape({-1, k})));
    out[0] = Value::Of(y.view(shape));
    return Status::OK();
  });
}

Result<Epilogue> EpilogueOf(const NodeInfo& n) {
  const std::string a = n.String("activation", "");
  if (a.empty()) return Epilogue::kNone;
  if (a == "Gelu") return Epilogue::kGeluErf;
  return n.Error("unknown fused activation '" + a + "'");
}

}  // namespace

void RegisterMkldnnOps(OpRegistry& r) {
  // Copies of the standard builders the wrappers fall back to.
  const Builder conv = *r.Find("", "Conv"), relu = *r.Find("", "Relu"), add = *r.Find("", "Add");
  const Builder max_pool = *r.Find("", "MaxPool"), global_avg = *r.Find("", "GlobalAveragePool");
  r.Add("", "Conv", [conv](const NodeInfo& n) { return PackedConv(conv, n); });
  r.Add("ai.inferd", "Conv", [conv](const NodeInfo& n) { return PackedConv(conv, n); });
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
    c.kernel = [standard = std::move(c.kernel), batched = std::make_shared<const BatchedMatMul>()](Args in,
                                                                                                   Outs out) -> Status {
      if (in.size() == 2 && in[0] && in[1] && in[0]->is_tensor() && in[1]->is_tensor()) {
        if (auto y = batched->Run(in[0]->tensor(), in[1]->tensor())) {
          INFERD_RETURN_IF_ERROR(y->status());
          out[0] = Value::Of(std::move(y->value()));
          return Status::OK();
        }
      }
      return standard(in, out);
    };
    return c;
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
  r.Add("", "Relu", [relu](const NodeInfo& n) {
    return Wrap(relu, n, [](Args in, Outs out) -> Result<bool> {
      out[0] = Value::Of(at::relu(in[0]->tensor()));
      return true;
    });
  });
  r.Add("", "Add", [add](const NodeInfo& n) {
    return Wrap(add, n, [](Args in, Outs out) -> Result<bool> {
      if (in.size() != 2 || in[0]->tensor().sizes() != in[1]->tensor().sizes()) return false;
      out[0] = Value::Of(at::add(in[0]->tensor(), in[1]->tensor()));
      return true;
    });
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
                    InRange(pads, 0) && 2 * pads[0] <= kernel[0] && 2 * pads[1] <= kernel[1];
    const bool ceil = n.Int("ceil_mode", 0) != 0;
    const std::vector<int64_t> padding = ok ? std::vector<int64_t>{pads[0], pads[1]} : std::vector<int64_t>{};
    return Wrap(max_pool, n, [ok, kernel, strides, padding, ceil](Args in, Outs out) -> Result<bool> {
      const at::Tensor& x = in[0]->tensor();
      if (!ok || x.dim() != 4 || x.numel() == 0) return false;
      // oneDNN does not check that the window fits: an output side of 0 or
      // less is left to the standard kernel, which reports it.
      for (int d = 0; d < 2; ++d)
        if (x.size(2 + d) + 2 * padding[d] < kernel[d]) return false;
      out[0] = Value::Of(at::max_pool2d(x, kernel, strides, padding, {1, 1}, ceil));
      return true;
    });
  });
  r.Add("", "GlobalAveragePool", [global_avg](const NodeInfo& n) {
    return Wrap(global_avg, n, [](Args in, Outs out) -> Result<bool> {
      // An empty side would make oneDNN's pooling stride 0 (SIGFPE).
      const at::Tensor& x = in[0]->tensor();
      if (x.dim() != 4 || x.numel() == 0) return false;
      out[0] = Value::Of(at::adaptive_avg_pool2d(x, {1, 1}));
      return true;
    });
  });
}

}  // namespace inferd::onnxexec::ops
