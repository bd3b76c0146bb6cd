#include "backends/onnx/ops/dnnl_conv.h"

#include <cstring>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backends/aten/dnnl_common.h"

namespace inferd::onnxexec::ops {
namespace {

using aten::Attr;
using aten::Bytes;
using aten::Execute;
using aten::PrimitiveCache;

using dnnl::memory;
using Tag = memory::format_tag;
using Dt = memory::data_type;

memory::desc Nchw(const std::vector<int64_t>& dims) {
  return memory::desc(memory::dims(dims.begin(), dims.end()), Dt::f32, Tag::nchw);
}

}  // namespace

struct PackedConv2d::Impl {
  // A primitive for one input shape, with the reorders around it when its
  // layouts are not plain NCHW, and the weights in the layout it takes.
  struct Entry {
    dnnl::convolution_forward prim;
    memory::desc src, dst, scratch;
    bool reorder_src = false, reorder_dst = false;
    memory weights;
    std::string impl;
  };

  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  ConvGeometry g;
  int64_t out_channels = 0, in_channels = 0, kh = 0, kw = 0;
  at::Tensor weight;  // [O, C / groups, kH, kW], contiguous: packed per layout on demand
  std::optional<memory> bias;
  PrimitiveCache<std::vector<int64_t>, Entry> by_shape;
  // Packed weights by layout, shared by the shapes whose primitives take it.
  mutable Mutex mu;
  mutable std::vector<std::pair<memory::desc, memory>> packed TSA_GUARDED_BY(mu);

  memory::desc PlainWeights() const {
    if (g.groups == 1) return memory::desc({out_channels, in_channels, kh, kw}, Dt::f32, Tag::oihw);
    return memory::desc({g.groups, out_channels / g.groups, in_channels / g.groups, kh, kw}, Dt::f32, Tag::goihw);
  }

  bool WinogradShape() const {
    return g.winograd && kh == 3 && kw == 3 && g.strides == std::array<int64_t, 2>{1, 1} &&
           g.dilations == std::array<int64_t, 2>{1, 1} && g.groups == 1;
  }

  dnnl::convolution_forward::primitive_desc Pd(const std::vector<int64_t>& in, const std::vector<int64_t>& out,
                                               dnnl::algorithm alg) const {
    const memory::desc src(memory::dims(in.begin(), in.end()), Dt::f32, Tag::any);
    const memory::desc dst(memory::dims(out.begin(), out.end()), Dt::f32, Tag::any);
    const memory::desc w(PlainWeights().dims(), Dt::f32, Tag::any);
    const memory::desc b = bias ? bias->get_desc() : memory::desc();
    // oneDNN's dilation counts the gaps (0 = none); ONNX's the step (1 = none).
    const memory::dims dil = {g.dilations[0] - 1, g.dilations[1] - 1};
    const memory::dims strides = {g.strides[0], g.strides[1]}, pad = {g.padding[0], g.padding[1]};
    return dnnl::convolution_forward::primitive_desc(
        dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, alg, src, w, b, dst, strides, dil, pad,
                                        pad),
        Attr(g.relu ? dnnl::algorithm::eltwise_relu : dnnl::algorithm::undef), eng);
  }

  // The weights packed in layout `d` (made once per layout).
  memory Weights(const memory::desc& d) const {
    MutexLock l(&mu);
    for (const auto& [desc, mem] : packed)
      if (desc == d) return mem;
    memory plain(PlainWeights(), eng, weight.data_ptr());
    memory out(d, eng);
    dnnl::stream s(eng);
    dnnl::reorder(plain, out).execute(s, plain, out);
    s.wait();
    packed.emplace_back(d, out);
    return out;
  }

  std::shared_ptr<const Entry> Make(const std::vector<int64_t>& in, const std::vector<int64_t>& out) const {
    std::optional<dnnl::convolution_forward::primitive_desc> pd;
    if (WinogradShape()) {
      try {
        pd.emplace(Pd(in, out, dnnl::algorithm::convolution_winograd));
      } catch (const dnnl::error&) {
      }
    }
    if (!pd) pd.emplace(Pd(in, out, dnnl::algorithm::convolution_direct));
    auto e = std::make_shared<Entry>();
    e->prim = dnnl::convolution_forward(*pd);
    e->src = pd->src_desc();
    e->dst = pd->dst_desc();
    e->scratch = pd->scratchpad_desc();
    e->reorder_src = e->src != Nchw(in);
    e->reorder_dst = e->dst != Nchw(out);
    e->weights = Weights(pd->weights_desc());
    e->impl = pd->impl_info_str();
    return e;
  }

  std::shared_ptr<const Entry> For(const std::vector<int64_t>& in, const std::vector<int64_t>& out) const {
    return by_shape.Get(in, [&] { return Make(in, out); });
  }

  Result<std::vector<int64_t>> OutShape(at::ScalarType dtype, at::IntArrayRef in) const {
    return ConvOutputShape(dtype, in, weight.sizes(), g);
  }
};

PackedConv2d::PackedConv2d(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PackedConv2d::~PackedConv2d() = default;
int64_t PackedConv2d::in_channels() const { return impl_->in_channels; }

std::optional<std::shared_ptr<const PackedConv2d>> PackedConv2d::Make(const at::Tensor& weight, const at::Tensor& bias,
                                                                      const ConvGeometry& g) {
  if (!PackableConv(weight, bias, g)) return std::nullopt;
  auto impl = std::make_unique<Impl>();
  impl->g = g;
  impl->out_channels = weight.size(0);
  impl->in_channels = weight.size(1) * g.groups;
  impl->kh = weight.size(2);
  impl->kw = weight.size(3);
  impl->weight = weight.contiguous();
  if (bias.defined()) {
    impl->bias.emplace(memory::desc({impl->out_channels}, Dt::f32, Tag::a), impl->eng);
    std::memcpy(impl->bias->get_data_handle(), bias.contiguous().data_ptr(), sizeof(float) * impl->out_channels);
  }
  return std::shared_ptr<const PackedConv2d>(new PackedConv2d(std::move(impl)));
}

Result<at::Tensor> PackedConv2d::Run(const at::Tensor& x) const {
  const Impl& p = *impl_;
  INFERD_ASSIGN_OR_RETURN(std::vector<int64_t> out_shape, p.OutShape(x.scalar_type(), x.sizes()));
  const std::vector<int64_t> in_shape = x.sizes().vec();
  at::Tensor xc = x.contiguous();
  at::Tensor y = at::empty(out_shape, xc.options());
  try {
    std::shared_ptr<const Impl::Entry> e = p.For(in_shape, out_shape);
    dnnl::stream s(p.eng);
    memory user_in(Nchw(in_shape), p.eng, xc.data_ptr()), user_out(Nchw(out_shape), p.eng, y.data_ptr());
    at::Tensor src_buf, dst_buf, pad;
    memory src = user_in, dst = user_out;
    if (e->reorder_src) {
      src_buf = Bytes(e->src);
      src = memory(e->src, p.eng, src_buf.data_ptr());
      dnnl::reorder(user_in, src).execute(s, user_in, src);
    }
    if (e->reorder_dst) {
      dst_buf = Bytes(e->dst);
      dst = memory(e->dst, p.eng, dst_buf.data_ptr());
    }
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, e->weights}, {DNNL_ARG_DST, dst}};
    if (p.bias) args.emplace(DNNL_ARG_BIAS, *p.bias);
    Execute(s, p.eng, e->prim, e->scratch, std::move(args), &pad);
    if (e->reorder_dst) dnnl::reorder(dst, user_out).execute(s, dst, user_out);
    s.wait();
  } catch (const dnnl::error& err) {
    return Status::Internal(std::string("oneDNN convolution: ") + err.what());
  }
  return y;
}

std::string PackedConv2d::ImplFor(const std::vector<int64_t>& shape) const {
  auto out = impl_->OutShape(at::kFloat, shape);
  if (!out.ok()) return out.status().message();
  try {
    return impl_->For(shape, *out)->impl;
  } catch (const dnnl::error& err) {
    return err.what();
  }
}

struct MaxPool2d::Impl {
  struct Entry {
    dnnl::pooling_forward prim;
    memory::desc scratch;
  };
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  std::array<int64_t, 2> kernel, strides, padding;
  PrimitiveCache<std::vector<int64_t>, Entry> by_shape;
};

MaxPool2d::MaxPool2d(std::array<int64_t, 2> kernel, std::array<int64_t, 2> strides, std::array<int64_t, 2> padding)
    : impl_(std::make_unique<Impl>()) {
  impl_->kernel = kernel;
  impl_->strides = strides;
  impl_->padding = padding;
}
MaxPool2d::~MaxPool2d() = default;

std::optional<Result<at::Tensor>> MaxPool2d::Run(const at::Tensor& x) const {
  const Impl& p = *impl_;
  if (x.scalar_type() != at::kFloat || x.dim() != 4 || x.numel() == 0) return std::nullopt;
  std::vector<int64_t> out = {x.size(0), x.size(1), 0, 0};
  for (int d = 0; d < 2; ++d) {
    const int64_t padded = x.size(2 + d) + 2 * p.padding[d];
    if (padded < p.kernel[d]) return std::nullopt;  // the caller's kernel reports what does not fit
    out[2 + d] = (padded - p.kernel[d]) / p.strides[d] + 1;
  }
  std::vector<int64_t> in = x.sizes().vec();
  // Channels-last inputs (the int8 convolutions' outputs: int8_conv.h) pooled as they are, into channels last.
  const bool channels_last = x.is_contiguous(at::MemoryFormat::ChannelsLast) && !x.is_contiguous();
  at::Tensor xc = channels_last ? x : x.contiguous();
  at::Tensor y = at::empty(
      out, xc.options().memory_format(channels_last ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous));
  try {
    const Tag tag = channels_last ? Tag::nhwc : Tag::nchw;
    const memory::desc src(memory::dims(in.begin(), in.end()), Dt::f32, tag),
        dst(memory::dims(out.begin(), out.end()), Dt::f32, tag);
    in.push_back(channels_last ? 1 : 0);  // the cache key: shape and layout
    std::shared_ptr<const Impl::Entry> e = p.by_shape.Get(in, [&] {
      const memory::dims k = {p.kernel[0], p.kernel[1]}, s = {p.strides[0], p.strides[1]},
                         pad = {p.padding[0], p.padding[1]};
      dnnl::pooling_forward::primitive_desc pd(
          dnnl::pooling_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::pooling_max, src, dst, s, k,
                                      pad, pad),
          Attr(), p.eng);
      auto entry = std::make_shared<Impl::Entry>();
      entry->prim = dnnl::pooling_forward(pd);
      entry->scratch = pd.scratchpad_desc();
      return std::shared_ptr<const Impl::Entry>(std::move(entry));
    });
    dnnl::stream st(p.eng);
    at::Tensor pad;
    Execute(st, p.eng, e->prim, e->scratch,
            {{DNNL_ARG_SRC, memory(src, p.eng, xc.data_ptr())}, {DNNL_ARG_DST, memory(dst, p.eng, y.data_ptr())}},
            &pad);
    st.wait();
  } catch (const dnnl::error& err) {
    return Result<at::Tensor>(Status::Internal(std::string("oneDNN pooling: ") + err.what()));
  }
  return Result<at::Tensor>(y);
}

}  // namespace inferd::onnxexec::ops
