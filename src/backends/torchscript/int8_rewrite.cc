#include "backends/torchscript/int8_rewrite.h"

#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>
#include <torch/custom_class.h>
#include <torch/library.h>

#include <memory>
#include <mutex>
#include <vector>

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

void RegisterInt8Linear() {
  static std::once_flag once;
  std::call_once(once, [] {
    // libtorch's registries are process-wide; these registrations are kept for the process (never destroyed: a
    // Library unregisters its operators when it goes).
    static auto* cls = new torch::class_<PackedInt8Linear>("inferd", "PackedInt8Linear");
    static auto* lib = new torch::Library(torch::Library::FRAGMENT, "inferd", c10::nullopt, __FILE__, __LINE__);
    lib->def("int8_linear(Tensor x, __torch__.torch.classes.inferd.PackedInt8Linear w) -> Tensor", &RunInt8Linear);
    (void)cls;
  });
}

// The constant tensor a graph value holds, or an undefined tensor.
at::Tensor ConstantTensor(jit::Value* v) {
  auto iv = jit::toIValue(v);
  return iv && iv->isTensor() ? iv->toTensor() : at::Tensor();
}

void Collect(jit::Block* block, std::vector<jit::Node*>* out) {
  for (jit::Node* n : block->nodes()) {
    if (n->kind() == c10::aten::linear || n->kind() == c10::aten::matmul) out->push_back(n);
    for (jit::Block* b : n->blocks()) Collect(b, out);
  }
}

}  // namespace

Int8Rewrite RewriteLinearsToInt8(torch::jit::Module& frozen) {
  RegisterInt8Linear();
  Int8Rewrite r;
  std::shared_ptr<jit::Graph> graph = frozen.get_method("forward").graph();
  std::vector<jit::Node*> nodes;
  Collect(graph->block(), &nodes);
  const c10::Symbol int8_linear = c10::Symbol::fromQualString("inferd::int8_linear");
  for (jit::Node* n : nodes) {
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
    jit::WithInsertPoint at(n);
    jit::Value* weights = graph->insertConstant(c10::IValue(packed));
    jit::Node* q = graph->create(int8_linear, {n->input(0), weights});
    q->insertBefore(n);
    q->output()->setType(c10::TensorType::get());
    n->output()->replaceAllUsesWith(q->output());
    n->destroy();
    ++r.layers;
    r.float_bytes += (*op)->float_bytes();
    r.quantized_bytes += (*op)->bytes();
  }
  if (r.layers > 0) jit::EliminateDeadCode(graph);
  return r;
}

}  // namespace inferd::torchscript
