#include "backends/aten/int8_conv.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "backends/aten/dnnl_common.h"

namespace inferd::aten {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;
using Dt = memory::data_type;

// A 4-D tensor's layout: NHWC (ATen's channels last) or NCHW.
memory::desc Layout(const std::vector<int64_t>& dims, Dt dt, bool channels_last) {
  return memory::desc(memory::dims(dims.begin(), dims.end()), dt, channels_last ? Tag::nhwc : Tag::nchw);
}

}  // namespace

struct Int8Conv2d::Impl {
  // One input shape and signedness: the primitive, the reorder that quantises the input into its source layout
  // (scaled at run time), and the weights in its layout.
  struct Entry {
    dnnl::convolution_forward prim;
    dnnl::reorder quantize;  // the float input (its layout) -> 8 bits in the primitive's source layout
    memory::desc src, scratch, quantize_scratch;
    memory weights;
    std::string impl;
  };

  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  ConvGeometry g;
  int64_t out_channels = 0;
  at::Tensor qweight;         // int8 [O, C / groups, kH, kW]
  std::vector<float> wscale;  // [O]
  at::Tensor bias;            // float [O] or undefined
  // By input shape, signedness and layout (channels last or not).
  PrimitiveCache<std::tuple<std::vector<int64_t>, bool, bool>, Entry> by_shape;

  memory::desc PlainWeights() const {
    const int64_t c = qweight.size(1), kh = qweight.size(2), kw = qweight.size(3);  // c: per group
    if (g.groups == 1) return memory::desc({out_channels, c, kh, kw}, Dt::s8, Tag::oihw);
    return memory::desc({g.groups, out_channels / g.groups, c, kh, kw}, Dt::s8, Tag::goihw);
  }

  std::shared_ptr<const Entry> Make(const std::vector<int64_t>& in, const std::vector<int64_t>& out, bool signed_input,
                                    bool channels_last_in) const {
    const memory::desc src(memory::dims(in.begin(), in.end()), signed_input ? Dt::s8 : Dt::u8, Tag::any);
    const memory::desc dst = Layout(out, Dt::f32, true);
    const memory::desc w(PlainWeights().dims(), Dt::s8, Tag::any);
    const memory::desc b = bias.defined() ? memory::desc({out_channels}, Dt::f32, Tag::a) : memory::desc();
    const memory::dims dil = {g.dilations[0] - 1, g.dilations[1] - 1};  // oneDNN counts the gaps
    const memory::dims strides = {g.strides[0], g.strides[1]}, pad = {g.padding[0], g.padding[1]};
    // oneDNN 2.6's convolutions take output scales fixed at creation only (run-time ones: matmul and reorders):
    // the weights' per channel here; the input's, which changes per call, multiplies the result as a binary
    // post-op whose operand is given at each call (after the ReLU: it commutes with that positive factor).
    dnnl::primitive_attr attr = Attr(g.relu ? dnnl::algorithm::eltwise_relu : dnnl::algorithm::undef);
    attr.set_output_scales(1 << 1, wscale);
    dnnl::post_ops ops = attr.get_post_ops();
    ops.append_binary(dnnl::algorithm::binary_mul, memory::desc({1, 1, 1, 1}, Dt::f32, Tag::nchw));
    attr.set_post_ops(ops);
    std::optional<dnnl::convolution_forward::primitive_desc> made;
    try {
      made.emplace(
          dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src,
                                          w, b, dst, strides, dil, pad, pad),
          attr, eng);
    } catch (const dnnl::error&) {
      return nullptr;  // no int8 kernel for this shape: Run computes it in FP32
    }
    const dnnl::convolution_forward::primitive_desc& pd = *made;
    auto e = std::make_shared<Entry>();
    e->prim = dnnl::convolution_forward(pd);
    e->src = pd.src_desc();
    e->scratch = pd.scratchpad_desc();
    e->impl = pd.impl_info_str();
    // The weights: int8 values reordered into the primitive's layout (oneDNN adds what its kernels need beside
    // them: compensation for signed inputs, AVX2's halved weights).
    e->weights = memory(pd.weights_desc(), eng);
    memory plain(PlainWeights(), eng, qweight.data_ptr());
    dnnl::stream s(eng);
    dnnl::reorder(plain, e->weights).execute(s, plain, e->weights);
    s.wait();
    // float -> 8 bits in the source layout, times 1 / (the input's scale), rounded and saturated.
    dnnl::primitive_attr qattr;
    qattr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    qattr.set_output_scales(0, {DNNL_RUNTIME_F32_VAL});
    dnnl::reorder::primitive_desc rpd(eng, Layout(in, Dt::f32, channels_last_in), eng, e->src, qattr);
    e->quantize = dnnl::reorder(rpd);
    e->quantize_scratch = rpd.scratchpad_desc();
    return e;
  }

  std::shared_ptr<const Entry> For(const std::vector<int64_t>& in, const std::vector<int64_t>& out, bool signed_input,
                                   bool channels_last_in) const {
    return by_shape.Get({in, signed_input, channels_last_in},
                        [&] { return Make(in, out, signed_input, channels_last_in); });
  }

  Result<std::vector<int64_t>> OutShape(at::ScalarType dtype, at::IntArrayRef in) const {
    return ConvOutputShape(dtype, in, qweight.sizes(), g);
  }
};

Int8Conv2d::Int8Conv2d(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Int8Conv2d::~Int8Conv2d() = default;

int64_t Int8Conv2d::bytes() const { return impl_->qweight.numel() + 4 * impl_->out_channels; }
int64_t Int8Conv2d::float_bytes() const { return 4 * impl_->qweight.numel(); }

std::optional<std::shared_ptr<const Int8Conv2d>> Int8Conv2d::Make(const at::Tensor& weight, const at::Tensor& bias,
                                                                  const ConvGeometry& g) {
  if (!PackableConv(weight, bias, g)) return std::nullopt;
  if (!at::isfinite(weight).all().item<bool>()) return std::nullopt;  // a NaN or infinite weight has no int8 value
  auto impl = std::make_unique<Impl>();
  impl->g = g;
  impl->out_channels = weight.size(0);
  // Per output channel: scale = max |w| / 127 (1 for an all-zero channel), values rounded to nearest.
  at::Tensor w = weight.contiguous().reshape({impl->out_channels, -1});
  at::Tensor amax = std::get<0>(w.abs().max(1));
  at::Tensor scale = at::where(amax > 0, amax / 127.0f, at::ones_like(amax));
  impl->qweight = at::clamp(at::round(w / scale.unsqueeze(1)), -127, 127).to(at::kChar).reshape(weight.sizes());
  impl->wscale.assign(scale.data_ptr<float>(), scale.data_ptr<float>() + impl->out_channels);
  if (bias.defined()) impl->bias = bias.reshape({impl->out_channels}).contiguous();
  return std::shared_ptr<const Int8Conv2d>(new Int8Conv2d(std::move(impl)));
}

Result<at::Tensor> Int8Conv2d::Run(const at::Tensor& x) const {
  const Impl& p = *impl_;
  INFERD_ASSIGN_OR_RETURN(std::vector<int64_t> out_shape, p.OutShape(x.scalar_type(), x.sizes()));
  const std::vector<int64_t> in_shape = x.sizes().vec();
  // Channels-last inputs (this kernel's own outputs, and what ATen's element-wise ops make of them) are read as
  // they are; anything else as NCHW.
  const bool channels_last_in = x.is_contiguous(at::MemoryFormat::ChannelsLast) && !x.is_contiguous();
  at::Tensor xc = channels_last_in ? x : x.contiguous();
  auto [lo_t, hi_t] = at::aminmax(xc);
  const float lo = lo_t.item<float>(), hi = hi_t.item<float>();
  if (!std::isfinite(lo) || !std::isfinite(hi)) {
    return Status::InvalidArgument("Conv input holds a value that is not finite (int8 needs a finite range)");
  }
  const bool signed_input = lo < 0;
  const float amax = std::max(std::abs(lo), std::abs(hi));
  // The output is channels last (NHWC): the layout oneDNN's int8 kernels write, kept for the next layer.
  at::Tensor y = at::empty(out_shape, xc.options().memory_format(at::MemoryFormat::ChannelsLast));
  if (amax == 0) {  // an all-zero input: the products are zero
    const at::Tensor b = p.bias.defined() ? p.bias.view({1, -1, 1, 1}) : at::zeros({1, p.out_channels, 1, 1});
    y.copy_(b.expand(out_shape));
    if (p.g.relu) y.relu_();
    return y;
  }
  float xscale = amax / (signed_input ? 127.0f : 255.0f);
  // Per call, the bias in the products' units: oneDNN adds it before the (weights') scales, and the input's scale
  // multiplies everything after.
  std::vector<float> qbias;
  if (p.bias.defined()) {
    qbias.resize(static_cast<size_t>(p.out_channels));
    const float* b = p.bias.data_ptr<float>();
    for (size_t o = 0; o < qbias.size(); ++o) qbias[o] = b[o] / (xscale * p.wscale[o]);
  }
  try {
    std::shared_ptr<const Impl::Entry> e = p.For(in_shape, out_shape, signed_input, channels_last_in);
    if (!e) return FallBack(xc);
    dnnl::stream s(p.eng);
    memory user_in(Layout(in_shape, Dt::f32, channels_last_in), p.eng, xc.data_ptr());
    memory dst(Layout(out_shape, Dt::f32, true), p.eng, y.data_ptr());
    at::Tensor src_buf = Bytes(e->src), pad, qpad;
    memory src(e->src, p.eng, src_buf.data_ptr());
    float inv = 1.0f / xscale;
    memory inv_mem({{1}, Dt::f32, Tag::a}, p.eng, &inv);
    Execute(s, p.eng, e->quantize, e->quantize_scratch,
            {{DNNL_ARG_FROM, user_in}, {DNNL_ARG_TO, src}, {DNNL_ARG_ATTR_OUTPUT_SCALES, inv_mem}}, &qpad);
    const int mul_index = p.g.relu ? 1 : 0;  // the binary post-op's position
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src},
                                         {DNNL_ARG_WEIGHTS, e->weights},
                                         {DNNL_ARG_DST, dst},
                                         {DNNL_ARG_ATTR_MULTIPLE_POST_OP(mul_index) | DNNL_ARG_SRC_1,
                                          memory({{1, 1, 1, 1}, Dt::f32, Tag::nchw}, p.eng, &xscale)}};
    if (!qbias.empty()) args.emplace(DNNL_ARG_BIAS, memory({{p.out_channels}, Dt::f32, Tag::a}, p.eng, qbias.data()));
    Execute(s, p.eng, e->prim, e->scratch, std::move(args), &pad);
    s.wait();
  } catch (const dnnl::error& err) {
    return Status::Internal(std::string("oneDNN int8 convolution: ") + err.what());
  }
  return y;
}

at::Tensor Int8Conv2d::FallBack(const at::Tensor& x) const {
  const Impl& p = *impl_;
  at::Tensor w = p.qweight.to(at::kFloat) *
                 at::from_blob(const_cast<float*>(p.wscale.data()), {p.out_channels, 1, 1, 1}, at::kFloat);
  at::Tensor y = at::conv2d(x, w, p.bias, {p.g.strides[0], p.g.strides[1]}, {p.g.padding[0], p.g.padding[1]},
                            {p.g.dilations[0], p.g.dilations[1]}, p.g.groups);
  return p.g.relu ? y.relu_() : y;
}

std::string Int8Conv2d::ImplFor(const std::vector<int64_t>& shape, bool signed_input) const {
  auto out = impl_->OutShape(at::kFloat, shape);
  if (!out.ok()) return out.status().message();
  try {
    auto e = impl_->For(shape, *out, signed_input, false);
    return e ? e->impl : "none (FP32 with the int8 weights)";
  } catch (const dnnl::error& err) {
    return err.what();
  }
}

}  // namespace inferd::aten
