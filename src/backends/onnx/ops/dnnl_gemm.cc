#include "backends/onnx/ops/dnnl_gemm.h"

#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backends/aten/dnnl_common.h"

namespace inferd::onnxexec::ops {
namespace {

using aten::Attr;
using aten::Execute;
using aten::PrimitiveCache;

using dnnl::memory;
using Tag = memory::format_tag;
using Dt = memory::data_type;

// The M the weights are packed for at load (a transformer's sequence length
// or a small batch); the packed layout depends on K and N, and the other
// Ms' primitives take it as it is (checked per M: see Entry).
constexpr int64_t kPackM = 64;

dnnl::algorithm PostOp(Epilogue e) {
  return e == Epilogue::kGeluErf ? dnnl::algorithm::eltwise_gelu_erf : dnnl::algorithm::undef;
}

// Runs `p` to the end on a stream of its own.
void RunToEnd(const dnnl::engine& eng, const dnnl::primitive& p, const memory::desc& scratch,
              std::unordered_map<int, memory> args) {
  dnnl::stream s(eng);
  at::Tensor pad;
  Execute(s, eng, p, scratch, std::move(args), &pad);
  s.wait();
}

}  // namespace

struct PackedGemm::Impl {
  // A primitive for one M, and the weights in the layout it takes when that
  // is not the packed one (oneDNN chose another for this M).
  struct Entry {
    dnnl::matmul prim;
    memory::desc scratch;
    std::optional<memory> own_weights;
  };

  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  int64_t k = 0, n = 0;
  Epilogue epilogue = Epilogue::kNone;
  memory weights;  // packed
  std::optional<memory> bias;
  PrimitiveCache<int64_t, Entry> by_m;

  memory::desc Src(int64_t m) const { return memory::desc({m, k}, Dt::f32, Tag::ab); }
  memory::desc Dst(int64_t m) const { return memory::desc({m, n}, Dt::f32, Tag::ab); }
  memory::desc BiasDesc() const { return memory::desc({1, n}, Dt::f32, Tag::ab); }

  dnnl::matmul::primitive_desc Pd(int64_t m, const memory::desc& w) const {
    const memory::desc none;
    return dnnl::matmul::primitive_desc(dnnl::matmul::desc(Src(m), w, bias ? BiasDesc() : none, Dst(m)),
                                        Attr(PostOp(epilogue)), eng);
  }

  std::shared_ptr<const Entry> Make(int64_t m) const {
    auto e = std::make_shared<Entry>();
    try {
      auto pd = Pd(m, weights.get_desc());
      e->prim = dnnl::matmul(pd);
      e->scratch = pd.scratchpad_desc();
      return e;
    } catch (const dnnl::error&) {
    }
    auto pd = Pd(m, memory::desc({k, n}, Dt::f32, Tag::any));
    e->prim = dnnl::matmul(pd);
    e->scratch = pd.scratchpad_desc();
    e->own_weights.emplace(pd.weights_desc(), eng);
    memory src = weights;
    dnnl::stream s(eng);
    dnnl::reorder(src, *e->own_weights).execute(s, src, *e->own_weights);
    s.wait();
    return e;
  }

  std::shared_ptr<const Entry> For(int64_t m) const {
    return by_m.Get(m, [&] { return Make(m); });
  }
};

PackedGemm::PackedGemm(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PackedGemm::~PackedGemm() = default;
int64_t PackedGemm::k() const { return impl_->k; }
int64_t PackedGemm::n() const { return impl_->n; }

std::optional<std::shared_ptr<const PackedGemm>> PackedGemm::Make(const at::Tensor& w, bool transposed,
                                                                  const at::Tensor& bias, Epilogue epilogue) {
  if (w.scalar_type() != at::kFloat || w.dim() != 2) return std::nullopt;
  at::Tensor kn = (transposed ? w.t() : w).contiguous();  // [K, N]
  auto impl = std::make_unique<Impl>();
  impl->k = kn.size(0);
  impl->n = kn.size(1);
  impl->epilogue = epilogue;
  if (impl->k < 1 || impl->n < 1) return std::nullopt;
  if (bias.defined() && (bias.scalar_type() != at::kFloat || bias.numel() != impl->n)) return std::nullopt;
  try {
    auto pd = impl->Pd(kPackM, memory::desc({impl->k, impl->n}, Dt::f32, Tag::any));
    impl->weights = memory(pd.weights_desc(), impl->eng);
    memory plain(memory::desc({impl->k, impl->n}, Dt::f32, Tag::ab), impl->eng, kn.data_ptr());
    dnnl::stream s(impl->eng);
    dnnl::reorder(plain, impl->weights).execute(s, plain, impl->weights);
    if (bias.defined()) {
      impl->bias.emplace(impl->BiasDesc(), impl->eng);
      at::Tensor b = bias.reshape({impl->n}).contiguous();
      std::memcpy(impl->bias->get_data_handle(), b.data_ptr(), sizeof(float) * impl->n);
    }
    s.wait();
  } catch (const dnnl::error&) {
    return std::nullopt;
  }
  return std::shared_ptr<const PackedGemm>(new PackedGemm(std::move(impl)));
}

Result<at::Tensor> PackedGemm::Run(const at::Tensor& x) const {
  const Impl& p = *impl_;
  if (x.scalar_type() != at::kFloat || x.dim() != 2 || x.size(1) != p.k || x.size(0) < 1) {
    return Status::InvalidArgument("takes a float [M, " + std::to_string(p.k) + "] input here, got " +
                                   std::string(c10::toString(x.scalar_type())) + " " + c10::str(x.sizes()));
  }
  const int64_t m = x.size(0);
  at::Tensor xc = x.contiguous();
  at::Tensor y = at::empty({m, p.n}, xc.options());
  try {
    std::shared_ptr<const Impl::Entry> e = p.For(m);
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, memory(p.Src(m), p.eng, xc.data_ptr())},
                                         {DNNL_ARG_WEIGHTS, e->own_weights ? *e->own_weights : p.weights},
                                         {DNNL_ARG_DST, memory(p.Dst(m), p.eng, y.data_ptr())}};
    if (p.bias) args.emplace(DNNL_ARG_BIAS, *p.bias);
    RunToEnd(p.eng, e->prim, e->scratch, std::move(args));
  } catch (const dnnl::error& err) {
    return Status::Internal(std::string("oneDNN matmul: ") + err.what());
  }
  return y;
}

struct BatchedMatMul::Impl {
  struct Entry {
    dnnl::matmul prim;
    memory::desc a, b, c, scratch;
  };
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  // Key: a's and b's dims and strides. A null entry: oneDNN takes no such
  // strides (the call runs on contiguous copies).
  PrimitiveCache<std::vector<int64_t>, Entry> cache;

  std::shared_ptr<const Entry> Make(const at::Tensor& a, const at::Tensor& b) const {
    auto desc = [](const at::Tensor& t) {
      return memory::desc(memory::dims(t.sizes().begin(), t.sizes().end()), Dt::f32,
                          memory::dims(t.strides().begin(), t.strides().end()));
    };
    auto e = std::make_shared<Entry>();
    e->a = desc(a);
    e->b = desc(b);
    e->c = memory::desc({a.size(0), a.size(1), b.size(2)}, Dt::f32, Tag::abc);
    try {
      dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(e->a, e->b, e->c), Attr(), eng);
      e->prim = dnnl::matmul(pd);
      e->scratch = pd.scratchpad_desc();
    } catch (const dnnl::error&) {
      return nullptr;
    }
    return e;
  }

  // nullptr: not with these strides.
  std::shared_ptr<const Entry> For(const at::Tensor& a, const at::Tensor& b) const {
    std::vector<int64_t> key;
    for (const at::Tensor* t : {&a, &b}) {
      key.insert(key.end(), t->sizes().begin(), t->sizes().end());
      key.insert(key.end(), t->strides().begin(), t->strides().end());
    }
    return cache.Get(key, [&] { return Make(a, b); });
  }
};

BatchedMatMul::BatchedMatMul() : impl_(std::make_unique<Impl>()) {}
BatchedMatMul::~BatchedMatMul() = default;

std::optional<Result<at::Tensor>> BatchedMatMul::Run(const at::Tensor& a, const at::Tensor& b) const {
  if (a.scalar_type() != at::kFloat || b.scalar_type() != at::kFloat || a.dim() != b.dim() || a.dim() < 2) {
    return std::nullopt;
  }
  const int64_t r = a.dim();
  if (a.sizes().slice(0, r - 2) != b.sizes().slice(0, r - 2) || a.size(r - 1) != b.size(r - 2)) return std::nullopt;
  for (int64_t d : a.sizes())
    if (d < 1) return std::nullopt;
  for (int64_t d : b.sizes())
    if (d < 1) return std::nullopt;
  const int64_t m = a.size(r - 2), k = a.size(r - 1), n = b.size(r - 1);
  // Batch dimensions as one (a view where the strides allow, else a copy).
  at::Tensor a3 = a.reshape({-1, m, k}), b3 = b.reshape({-1, k, n});
  std::vector<int64_t> shape(a.sizes().begin(), a.sizes().end() - 1);
  shape.push_back(n);
  try {
    std::shared_ptr<const Impl::Entry> e = impl_->For(a3, b3);
    if (!e) {
      a3 = a3.contiguous();
      b3 = b3.contiguous();
      e = impl_->For(a3, b3);
      if (!e) return std::nullopt;
    }
    at::Tensor c = at::empty({a3.size(0), m, n}, a.options());
    const dnnl::engine& eng = impl_->eng;
    RunToEnd(eng, e->prim, e->scratch,
             {{DNNL_ARG_SRC, memory(e->a, eng, a3.data_ptr())},
              {DNNL_ARG_WEIGHTS, memory(e->b, eng, b3.data_ptr())},
              {DNNL_ARG_DST, memory(e->c, eng, c.data_ptr())}});
    return Result<at::Tensor>(c.view(shape));
  } catch (const dnnl::error& err) {
    return Result<at::Tensor>(Status::Internal(std::string("oneDNN matmul: ") + err.what()));
  }
}

}  // namespace inferd::onnxexec::ops
