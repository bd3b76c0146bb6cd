#include "backends/torchscript/int8_rewrite.h"

#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>
#include <torch/custom_class.h>
#include <torch/library.h>

#include <array>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "backends/aten/int8_conv.h"
#include "backends/aten/int8_linear.h"

namespace inferd::torchscript {
namespace {

namespace jit = torch::jit;

struct PackedInt8Linear : torch::CustomClassHolder {
  std::shared_ptr<const aten::Int8Linear> op;
};

// inferd::int8_linear: x [..., K] -> [..., N].
at::Tensor RunInt8Linear(const at::Tensor& x, const c10::intrusive_ptr<PackedInt8Linear>& w) {
  const aten::Int8Linear& op = *w->op;
  TORCH_CHECK(x.scalar_type() == at::kFloat && x.dim() >= 1 && x.size(-1) == op.k(),
              "inferd::int8_linear takes a float [..., ", op.k(), "] input, got ", x.scalar_type(), " ", x.sizes());
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = op.n();
  if (x.numel() == 0) return at::zeros(shape, x.options());
  Result<at::Tensor> y = op.Run(x.reshape({-1, op.k()}));
  TORCH_CHECK(y.ok(), "inferd::int8_linear: ", y.status().message());
  return y->view(shape);
}

struct PackedInt8Conv2d : torch::CustomClassHolder {
  std::shared_ptr<const aten::Int8Conv2d> op;
  bool contiguous = false;  // answer NCHW-contiguous (the graph views tensors), else channels last
};

// inferd::int8_conv2d: x [N, C, H, W] -> [N, O, H', W'].
at::Tensor RunInt8Conv2d(const at::Tensor& x, const c10::intrusive_ptr<PackedInt8Conv2d>& w) {
  Result<at::Tensor> y = w->op->Run(x);
  TORCH_CHECK(y.ok(), "inferd::int8_conv2d: ", y.status().message());
  return w->contiguous ? y->contiguous() : *y;
}

void RegisterInt8Linear() {
  static std::once_flag once;
  std::call_once(once, [] {
    // libtorch's registries are process-wide; these registrations are kept for the process (never destroyed: a
    // Library unregisters its operators when it goes).
    static auto* linear = new torch::class_<PackedInt8Linear>("inferd", "PackedInt8Linear");
    static auto* conv = new torch::class_<PackedInt8Conv2d>("inferd", "PackedInt8Conv2d");
    static auto* lib = new torch::Library(torch::Library::FRAGMENT, "inferd", c10::nullopt, __FILE__, __LINE__);
    lib->def("int8_linear(Tensor x, __torch__.torch.classes.inferd.PackedInt8Linear w) -> Tensor", &RunInt8Linear);
    lib->def("int8_conv2d(Tensor x, __torch__.torch.classes.inferd.PackedInt8Conv2d w) -> Tensor", &RunInt8Conv2d);
    (void)linear;
    (void)conv;
  });
}

// The constant tensor a graph value holds, or an undefined tensor.
at::Tensor ConstantTensor(jit::Value* v) {
  auto iv = jit::toIValue(v);
  return iv && iv->isTensor() ? iv->toTensor() : at::Tensor();
}

// A constant int list of one or two values as two; nullopt otherwise.
std::optional<std::array<int64_t, 2>> Pair(jit::Value* v) {
  auto iv = jit::toIValue(v);
  if (!iv || !iv->isIntList()) return std::nullopt;
  const std::vector<int64_t> l = iv->toIntVector();
  if (l.size() == 1) return std::array<int64_t, 2>{l[0], l[0]};
  if (l.size() == 2) return std::array<int64_t, 2>{l[0], l[1]};
  return std::nullopt;
}

// aten::conv2d (scripted) and aten::_convolution (traced, not transposed) with constant weights and geometry: the
// geometry; nullopt when the convolution is not one the int8 kernel takes.
std::optional<aten::ConvGeometry> ConvOf(jit::Node* n) {
  const bool traced = n->kind() == c10::aten::_convolution;
  if (n->inputs().size() != (traced ? 13u : 7u)) return std::nullopt;
  auto strides = Pair(n->input(3)), padding = Pair(n->input(4)), dilations = Pair(n->input(5));
  auto groups = jit::toIValue(n->input(traced ? 8 : 6));
  if (!strides || !padding || !dilations || !groups || !groups->isInt()) return std::nullopt;
  if (traced) {
    auto transposed = jit::toIValue(n->input(6));
    auto output_padding = Pair(n->input(7));
    if (!transposed || !transposed->isBool() || transposed->toBool() || !output_padding || (*output_padding)[0] != 0 ||
        (*output_padding)[1] != 0)
      return std::nullopt;
  }
  aten::ConvGeometry g;
  g.strides = *strides;
  g.padding = *padding;
  g.dilations = *dilations;
  g.groups = groups->toInt();
  return g;
}

// `views`: whether the graph has an aten::view anywhere (which fails on the channels-last tensors the int8
// convolutions answer when their layout reaches it).
void Collect(jit::Block* block, std::vector<jit::Node*>* out, bool* views) {
  for (jit::Node* n : block->nodes()) {
    *views = *views || n->kind() == c10::aten::view;
    if (n->kind() == c10::aten::linear || n->kind() == c10::aten::matmul || n->kind() == c10::aten::conv2d ||
        n->kind() == c10::aten::_convolution)
      out->push_back(n);
    for (jit::Block* b : n->blocks()) Collect(b, out, views);
  }
}

// Replaces `n` (and `last`, its only user, when given) by op(n's input 0, `packed` as a constant), and counts it.
template <typename Holder>
void Replace(jit::Graph* graph, jit::Node* n, jit::Node* last, c10::Symbol op, c10::intrusive_ptr<Holder> packed,
             Int8Rewrite* r) {
  const auto& kernel = packed->op;
  jit::WithInsertPoint at(n);
  jit::Value* weights = graph->insertConstant(c10::IValue(packed));
  jit::Node* q = graph->create(op, {n->input(0), weights});
  q->insertBefore(n);
  q->output()->setType(c10::TensorType::get());
  (last ? last : n)->output()->replaceAllUsesWith(q->output());
  if (last) last->destroy();
  n->destroy();
  ++r->layers;
  r->float_bytes += kernel->float_bytes();
  r->quantized_bytes += kernel->bytes();
}

// The convolution `n` as inferd::int8_conv2d, with a ReLU that is its only user fused in.
void RewriteConv(jit::Node* n, c10::Symbol int8_conv2d, bool contiguous, jit::Graph* graph, Int8Rewrite* r) {
  std::optional<aten::ConvGeometry> g = ConvOf(n);
  at::Tensor w = ConstantTensor(n->input(1));
  if (!g || !w.defined() || w.scalar_type() != at::kFloat || w.dim() != 4) return;
  auto b = jit::toIValue(n->input(2));
  if (!b || !(b->isNone() || b->isTensor())) return;
  const at::Tensor bias = b->isTensor() ? b->toTensor() : at::Tensor();
  jit::Node* relu = nullptr;
  if (n->output()->uses().size() == 1) {
    jit::Node* user = n->output()->uses()[0].user;
    if (user->kind() == c10::aten::relu && user->inputs().size() == 1 && user->owningBlock() == n->owningBlock())
      relu = user;
  }
  g->relu = relu != nullptr;
  auto op = aten::Int8Conv2d::Make(w, bias, *g);
  if (!op) return;
  auto packed = c10::make_intrusive<PackedInt8Conv2d>();
  packed->op = *op;
  packed->contiguous = contiguous;
  Replace(graph, n, relu, int8_conv2d, packed, r);
}

}  // namespace

Int8Rewrite RewriteLinearsToInt8(torch::jit::Module& frozen) {
  RegisterInt8Linear();
  Int8Rewrite r;
  std::shared_ptr<jit::Graph> graph = frozen.get_method("forward").graph();
  std::vector<jit::Node*> nodes;
  bool views = false;
  Collect(graph->block(), &nodes, &views);
  const c10::Symbol int8_linear = c10::Symbol::fromQualString("inferd::int8_linear");
  const c10::Symbol int8_conv2d = c10::Symbol::fromQualString("inferd::int8_conv2d");
  for (jit::Node* n : nodes) {
    if (n->kind() == c10::aten::conv2d || n->kind() == c10::aten::_convolution) {
      RewriteConv(n, int8_conv2d, /*contiguous=*/views, graph.get(), &r);
      continue;
    }
    const bool linear = n->kind() == c10::aten::linear;
    if (n->inputs().size() != (linear ? 3u : 2u)) continue;
    at::Tensor w = ConstantTensor(n->input(1));
    if (!w.defined() || w.scalar_type() != at::kFloat || w.dim() != 2) continue;
    at::Tensor bias;
    if (linear) {
      auto b = jit::toIValue(n->input(2));
      if (!b || !(b->isNone() || b->isTensor())) continue;  // a bias computed at run time
      if (b->isTensor()) bias = b->toTensor();
    }
    // aten::linear's weight is [N, K]; matmul's right side [K, N].
    auto op = aten::Int8Linear::Make(w, /*transposed=*/linear, bias, aten::Int8Epilogue::kNone);
    if (!op) continue;
    auto packed = c10::make_intrusive<PackedInt8Linear>();
    packed->op = *op;
    Replace(graph.get(), n, nullptr, int8_linear, packed, &r);
  }
  if (r.layers > 0) jit::EliminateDeadCode(graph);
  return r;
}

}  // namespace inferd::torchscript
