// Neural-network ops: Conv, ConvTranspose, pooling, normalisations, softmax
// family, Gemm, MatMul, Einsum, LRN.
#include <cmath>
#include <numeric>

#include "backends/onnx/ops/op_util.h"

namespace inferd::onnxexec::ops {
namespace {

using Args = const std::vector<const Value*>&;
using Outs = std::vector<Value>&;

// Window attributes shared by Conv and the pools.
struct Window {
  std::vector<int64_t> kernel, strides, dilations, pads;  // pads: begins then ends
  std::string auto_pad;
  bool ceil_mode = false;
};

Window ReadWindow(const NodeInfo& n) {
  Window w;
  w.kernel = n.Ints("kernel_shape");
  w.strides = n.Ints("strides");
  w.dilations = n.Ints("dilations");
  w.pads = n.Ints("pads");
  w.auto_pad = n.String("auto_pad", "NOTSET");
  w.ceil_mode = n.Int("ceil_mode", 0) != 0;
  return w;
}

// Fills defaults for `spatial` dims and resolves auto_pad against the
// input's spatial sizes. `kernel` must be known.
Status Resolve(Window* w, const at::Tensor& x, int64_t spatial) {
  if (static_cast<int64_t>(w->kernel.size()) != spatial)
    return Status::InvalidArgument("kernel_shape does not match the input rank");
  if (w->strides.empty()) w->strides.assign(spatial, 1);
  if (w->dilations.empty()) w->dilations.assign(spatial, 1);
  if (w->pads.empty()) w->pads.assign(2 * spatial, 0);
  if (static_cast<int64_t>(w->strides.size()) != spatial || static_cast<int64_t>(w->dilations.size()) != spatial ||
      static_cast<int64_t>(w->pads.size()) != 2 * spatial) {
    return Status::InvalidArgument("strides, dilations or pads do not match the input rank");
  }
  if (w->auto_pad == "SAME_UPPER" || w->auto_pad == "SAME_LOWER") {
    for (int64_t d = 0; d < spatial; ++d) {
      const int64_t in = x.size(2 + d), s = w->strides[d];
      const int64_t out = (in + s - 1) / s;
      const int64_t total = std::max<int64_t>(0, (out - 1) * s + (w->kernel[d] - 1) * w->dilations[d] + 1 - in);
      const int64_t small = total / 2, big = total - small;
      w->pads[d] = w->auto_pad == "SAME_UPPER" ? small : big;
      w->pads[d + spatial] = w->auto_pad == "SAME_UPPER" ? big : small;
    }
  } else if (w->auto_pad == "VALID") {
    std::fill(w->pads.begin(), w->pads.end(), 0);
  } else if (w->auto_pad != "NOTSET" && !w->auto_pad.empty()) {
    return Status::InvalidArgument("unknown auto_pad '" + w->auto_pad + "'");
  }
  return Status::OK();
}

bool Symmetric(const Window& w) { return SymmetricPads(w.pads); }

// Pads the spatial dims by the window's (asymmetric) pads with `value`.
at::Tensor PadSpatial(const at::Tensor& x, const Window& w, double value) {
  const size_t n = w.pads.size() / 2;
  std::vector<int64_t> p;
  for (size_t d = n; d-- > 0;) {
    p.push_back(w.pads[d]);
    p.push_back(w.pads[d + n]);
  }
  return at::constant_pad_nd(x, p, value);
}

std::vector<int64_t> Begins(const Window& w) { return {w.pads.begin(), w.pads.begin() + w.pads.size() / 2}; }

Result<Compiled> Conv(const NodeInfo& n) {
  Window w0 = ReadWindow(n);
  const int64_t group = n.Int("group", 1);
  return Make([w0, group](Args in, Outs out) -> Status {
    INFERD_ASSIGN_OR_RETURN(at::Tensor x, In(in, 0));
    INFERD_ASSIGN_OR_RETURN(at::Tensor wt, In(in, 1));
    const int64_t spatial = x.dim() - 2;
    if (spatial < 1 || wt.dim() != x.dim()) return Status::InvalidArgument("Conv input and weight ranks do not match");
    Window w = w0;
    if (w.kernel.empty()) w.kernel.assign(wt.sizes().begin() + 2, wt.sizes().end());
    INFERD_RETURN_IF_ERROR(Resolve(&w, x, spatial));
    c10::optional<at::Tensor> bias;
    if (Present(in, 2)) bias = in[2]->tensor();
    std::vector<int64_t> padding = Begins(w);
    if (!Symmetric(w)) {
      x = PadSpatial(x, w, 0.0);
      padding.assign(spatial, 0);
    }
    out[0] = Value::Of(
        at::convolution(x, wt, bias, w.strides, padding, w.dilations, false, std::vector<int64_t>(spatial, 0), group));
    return Status::OK();
  });
}

Result<Compiled> ConvTranspose(const NodeInfo& n) {
  Window w0 = ReadWindow(n);
  const int64_t group = n.Int("group", 1);
  const std::vector<int64_t> output_padding = n.Ints("output_padding"), output_shape = n.Ints("output_shape");
  return Make([w0, group, output_padding, output_shape](Args in, Outs out) -> Status {
    INFERD_ASSIGN_OR_RETURN(at::Tensor x, In(in, 0));
    INFERD_ASSIGN_OR_RETURN(at::Tensor wt, In(in, 1));
    const int64_t spatial = x.dim() - 2;
    Window w = w0;
    if (w.kernel.empty()) w.kernel.assign(wt.sizes().begin() + 2, wt.sizes().end());
    if (w.strides.empty()) w.strides.assign(spatial, 1);
    if (w.dilations.empty()) w.dilations.assign(spatial, 1);
    if (w.pads.empty()) w.pads.assign(2 * spatial, 0);
    std::vector<int64_t> opad = output_padding.empty() ? std::vector<int64_t>(spatial, 0) : output_padding;
    // Total padding per dim from output_shape or auto_pad (SAME: output = input * stride).
    if (!output_shape.empty() || w.auto_pad == "SAME_UPPER" || w.auto_pad == "SAME_LOWER") {
      for (int64_t d = 0; d < spatial; ++d) {
        const int64_t in_d = x.size(2 + d);
        const int64_t want =
            output_shape.empty() ? in_d * w.strides[d] : output_shape[output_shape.size() - spatial + d];
        const int64_t full = w.strides[d] * (in_d - 1) + opad[d] + ((w.kernel[d] - 1) * w.dilations[d] + 1);
        const int64_t total = std::max<int64_t>(0, full - want);
        const bool upper = w.auto_pad != "SAME_LOWER";
        w.pads[d] = upper ? total / 2 : total - total / 2;
        w.pads[d + spatial] = total - w.pads[d];
        if (total == 0 && want > full) opad[d] += want - full;
      }
    }
    c10::optional<at::Tensor> bias;
    if (Present(in, 2)) bias = in[2]->tensor();
    // ATen pads symmetrically: run with the smaller pad, then crop the rest.
    std::vector<int64_t> padding(spatial), extra_end(spatial), extra_begin(spatial);
    for (int64_t d = 0; d < spatial; ++d) {
      padding[d] = std::min(w.pads[d], w.pads[d + spatial]);
      extra_begin[d] = w.pads[d] - padding[d];
      extra_end[d] = w.pads[d + spatial] - padding[d];
    }
    at::Tensor y = at::convolution(x, wt, bias, w.strides, padding, w.dilations, true, opad, group);
    for (int64_t d = 0; d < spatial; ++d) {
      if (extra_begin[d] || extra_end[d]) y = y.slice(2 + d, extra_begin[d], y.size(2 + d) - extra_end[d]);
    }
    out[0] = Value::Of(y);
    return Status::OK();
  });
}

// Sum pooling with a divisor per output (handles asymmetric pads, ceil mode
// and count_include_pad exactly).
at::Tensor SumPool(const at::Tensor& x, const Window& w) {
  const int64_t spatial = x.dim() - 2;
  at::Tensor v = spatial == 1 ? x.unsqueeze(2) : x;
  std::vector<int64_t> k = w.kernel, s = w.strides;
  if (spatial == 1) {
    k.insert(k.begin(), 1);
    s.insert(s.begin(), 1);
  }
  at::Tensor r = v.dim() == 4 ? at::avg_pool2d(v, k, s, 0, w.ceil_mode, true, 1)
                              : at::avg_pool3d(v, k, s, 0, w.ceil_mode, true, 1);
  return spatial == 1 ? r.squeeze(2) : r;
}

Result<Compiled> AveragePool(const NodeInfo& n) {
  Window w0 = ReadWindow(n);
  const bool include_pad = n.Int("count_include_pad", 0) != 0;
  return Make([w0, include_pad](Args in, Outs out) -> Status {
    INFERD_ASSIGN_OR_RETURN(at::Tensor x, In(in, 0));
    const int64_t spatial = x.dim() - 2;
    if (spatial < 1 || spatial > 3) return Status::InvalidArgument("AveragePool takes 1 to 3 spatial dimensions");
    Window w = w0;
    INFERD_RETURN_IF_ERROR(Resolve(&w, x, spatial));
    for (int64_t d : w.dilations)
      if (d != 1) return Status::Unimplemented("AveragePool with dilations");
    at::Tensor xp = PadSpatial(x, w, 0.0);
    at::Tensor ones = at::ones_like(x);
    at::Tensor mask = include_pad ? PadSpatial(ones, w, 1.0) : PadSpatial(ones, w, 0.0);
    out[0] = Value::Of(SumPool(xp, w) / SumPool(mask, w));
    return Status::OK();
  });
}

Result<Compiled> MaxPool(const NodeInfo& n) {
  Window w0 = ReadWindow(n);
  if (n.Int("storage_order", 0) != 0 && n.has_output(1)) return n.Error("storage_order 1 is not supported");
  const bool want_indices = n.has_output(1);
  return Make([w0, want_indices](Args in, Outs out) -> Status {
    INFERD_ASSIGN_OR_RETURN(at::Tensor x, In(in, 0));
    const int64_t spatial = x.dim() - 2;
    if (spatial < 1 || spatial > 3) return Status::InvalidArgument("MaxPool takes 1 to 3 spatial dimensions");
    Window w = w0;
    INFERD_RETURN_IF_ERROR(Resolve(&w, x, spatial));
    const bool integral = at::isIntegralType(x.scalar_type(), false);
    at::Tensor v = integral ? x.to(at::kDouble) : x;
    std::vector<int64_t> padding = Begins(w);
    if (!Symmetric(w)) {
      if (want_indices) return Status::Unimplemented("MaxPool indices with asymmetric pads");
      v = PadSpatial(v, w, -std::numeric_limits<double>::infinity());
      padding.assign(spatial, 0);
    }
    // ATen wants pads <= kernel/2; larger ones are pre-padded.
    for (int64_t d = 0; d < spatial; ++d) {
      if (padding[d] * 2 > w.kernel[d]) {
        if (want_indices) return Status::Unimplemented("MaxPool indices with pads over half the kernel");
        v = PadSpatial(v, w, -std::numeric_limits<double>::infinity());
        padding.assign(spatial, 0);
        break;
      }
    }
    at::Tensor y, idx;
    if (spatial == 1) {
      std::tie(y, idx) = at::max_pool2d_with_indices(v.unsqueeze(2), {1, w.kernel[0]}, {1, w.strides[0]},
                                                     {0, padding[0]}, {1, w.dilations[0]}, w.ceil_mode);
      y = y.squeeze(2);
      idx = idx.squeeze(2);
    } else if (spatial == 2) {
      std::tie(y, idx) = at::max_pool2d_with_indices(v, w.kernel, w.strides, padding, w.dilations, w.ceil_mode);
    } else {
      std::tie(y, idx) = at::max_pool3d_with_indices(v, w.kernel, w.strides, padding, w.dilations, w.ceil_mode);
    }
    out[0] = Value::Of(integral ? y.to(x.scalar_type()) : y);
    if (want_indices) {
      int64_t plane = 1;
      for (int64_t d = 2; d < x.dim(); ++d) plane *= x.size(d);
      at::Tensor base = at::arange(x.size(0) * x.size(1), at::kLong).reshape({x.size(0), x.size(1)}) * plane;
      for (int64_t d = 0; d < spatial; ++d) base = base.unsqueeze(-1);
      out[1] = Value::Of(idx + base);
    }
    return Status::OK();
  });
}

// Softmax family: opset < 13 flattens to 2-D at `axis` (default 1).
enum class SoftKind { kSoftmax, kLogSoftmax, kHardmax };
Result<Compiled> Softmax(const NodeInfo& n, SoftKind kind) {
  const bool legacy = n.opset() < 13;
  const int64_t axis = n.Int("axis", legacy ? 1 : -1);
  return Make([legacy, axis, kind](Args in, Outs out) -> Status {
    INFERD_ASSIGN_OR_RETURN(at::Tensor x, In(in, 0));
    INFERD_ASSIGN_OR_RETURN(int64_t a, Axis(axis, std::max<int64_t>(x.dim(), 1)));
    at::Tensor v = x;
    int64_t dim = a;
    if (legacy) {
      int64_t outer = 1;
      for (int64_t d = 0; d < a; ++d) outer *= x.size(d);
      v = x.reshape({outer, -1});
      dim = 1;
    }
    at::Tensor y;
    switch (kind) {
      case SoftKind::kSoftmax:
        y = at::softmax(v, dim);
        break;
      case SoftKind::kLogSoftmax:
        y = at::log_softmax(v, dim);
        break;
      case SoftKind::kHardmax: {
        at::Tensor arg = at::argmax(v, dim, true);
        y = at::zeros_like(v).scatter(dim, arg, 1);
        break;
      }
    }
    out[0] = Value::Of(y.reshape(x.sizes()));
    return Status::OK();
  });
}

}  // namespace

void RegisterNnOps(OpRegistry& r) {
  r.Add("", "Conv", Conv);
  r.Add("", "ConvTranspose", ConvTranspose);
  r.Add("", "AveragePool", AveragePool);
  r.Add("", "MaxPool", MaxPool);
  r.Add("", "GlobalAveragePool", [](const NodeInfo&) -> Result<Compiled> {
    return Make([](Args in, Outs out) -> Status {
      INFERD_ASSIGN_OR_RETURN(at::Tensor x, In(in, 0));
      std::vector<int64_t> dims(x.dim() - 2);
      std::iota(dims.begin(), dims.end(), 2);
      out[0] = Value::Of(x.mean(dims, true));
      return Status::OK();
    });
  });
  r.Add("", "GlobalMaxPool", [](const NodeInfo&) -> Result<Compiled> {
    return Make([](Args in, Outs out) -> Status {
      INFERD_ASSIGN_OR_RETURN(at::Tensor x, In(in, 0));
      std::vector<int64_t> dims(x.dim() - 2);
      std::iota(dims.begin(), dims.end(), 2);
      out[0] = Value::Of(at::amax(x, dims, true));
      return Status::OK();
    });
  });
  r.Add("", "BatchNormalization", [](const NodeInfo& n) -> Result<Compiled> {
    if (n.Int("training_mode", 0) != 0) return n.Error("training_mode is not supported");
    if (n.opset() < 7 && n.Int("is_test", 0) == 0) return n.Error("training mode (is_test 0) is not supported");
    const double eps = n.Float("epsilon", 1e-5f);
    return Make([eps](Args in, Outs out) -> Status {
      INFERD_ASSIGN_OR_RETURN(at::Tensor x, In(in, 0));
      INFERD_ASSIGN_OR_RETURN(at::Tensor scale, In(in, 1));
      INFERD_ASSIGN_OR_RETURN(at::Tensor b, In(in, 2));
      INFERD_ASSIGN_OR_RETURN(at::Tensor mean, In(in, 3));
      INFERD_ASSIGN_OR_RETURN(at::Tensor var, In(in, 4));
      out[0] = Value::Of(at::batch_norm(x, scale, b, mean, var, false, 0.0, eps, false));
      return Status::OK();
    });
  });
  r.Add("", "InstanceNormalization", [](const NodeInfo& n) -> Result<Compiled> {
    const double eps = n.Float("epsilon", 1e-5f);
    return Make([eps](Args in, Outs out) -> Status {
      INFERD_ASSIGN_OR_RETURN(at::Tensor x, In(in, 0));
      INFERD_ASSIGN_OR_RETURN(at::Tensor scale, In(in, 1));
      INFERD_ASSIGN_OR_RETURN(at::Tensor b, In(in, 2));
      out[0] = Value::Of(at::instance_norm(x, scale, b, {}, {}, true, 0.0, eps, false));
      return Status::OK();
    });
  });
  r.Add("", "LayerNormalization", [](const NodeInfo& n) -> Result<Compiled> {
    const double eps = n.Float("epsilon", 1e-5f);
    const int64_t axis = n.Int("axis", -1);
    const bool more = n.has_output(1) || n.has_output(2);
    return Make([eps, axis, more](Args in, Outs out) -> Status {
      INFERD_ASSIGN_OR_RETURN(at::Tensor x, In(in, 0));
      INFERD_ASSIGN_OR_RETURN(at::Tensor scale, In(in, 1));
      INFERD_ASSIGN_OR_RETURN(int64_t a, Axis(axis, x.dim()));
      std::vector<int64_t> norm(x.sizes().begin() + a, x.sizes().end());
      at::Tensor w = scale.expand(norm);
      c10::optional<at::Tensor> b;
      if (Present(in, 2)) b = in[2]->tensor().expand(norm);
      const bool low = x.scalar_type() == at::kHalf || x.scalar_type() == at::kBFloat16;
      at::Tensor xv = low ? x.to(at::kFloat) : x;
      auto [y, mean, rstd] = at::native_layer_norm(xv, norm, low ? c10::optional<at::Tensor>(w.to(at::kFloat)) : w,
                                                   b && low ? c10::optional<at::Tensor>(b->to(at::kFloat)) : b, eps);
      out[0] = Value::Of(low ? y.to(x.scalar_type()) : y);
      if (more) {
        std::vector<int64_t> stat(x.sizes().begin(), x.sizes().begin() + a);
        stat.resize(x.dim(), 1);
        if (out.size() > 1) out[1] = Value::Of(mean.reshape(stat));
        if (out.size() > 2) out[2] = Value::Of(rstd.reshape(stat));
      }
      return Status::OK();
    });
  });
  r.Add("", "Softmax", [](const NodeInfo& n) { return Softmax(n, SoftKind::kSoftmax); });
  r.Add("", "LogSoftmax", [](const NodeInfo& n) { return Softmax(n, SoftKind::kLogSoftmax); });
  r.Add("", "Hardmax", [](const NodeInfo& n) { return Softmax(n, SoftKind::kHardmax); });
  r.Add("", "Gemm", [](const NodeInfo& n) -> Result<Compiled> {
    const double alpha = n.Float("alpha", 1.0f), beta = n.Float("beta", 1.0f);
    const bool ta = n.Int("transA", 0) != 0, tb = n.Int("transB", 0) != 0;
    return Make([alpha, beta, ta, tb](Args in, Outs out) -> Status {
      INFERD_ASSIGN_OR_RETURN(at::Tensor a, In(in, 0));
      INFERD_ASSIGN_OR_RETURN(at::Tensor b, In(in, 1));
      if (ta) a = a.t();
      if (tb) b = b.t();
      if (Present(in, 2) && beta != 0) {
        const at::Tensor& c = in[2]->tensor();
        out[0] = Value::Of(at::addmm(c.expand({a.size(0), b.size(1)}), a, b, beta, alpha));
      } else {
        at::Tensor y = at::mm(a, b);
        out[0] = Value::Of(alpha == 1.0 ? y : y * alpha);
      }
      return Status::OK();
    });
  });
  r.Add("", "MatMul", [](const NodeInfo&) -> Result<Compiled> {
    return Make([](Args in, Outs out) -> Status {
      INFERD_ASSIGN_OR_RETURN(at::Tensor a, In(in, 0));
      INFERD_ASSIGN_OR_RETURN(at::Tensor b, In(in, 1));
      out[0] = Value::Of(at::matmul(a, b));
      return Status::OK();
    });
  });
  r.Add("", "Einsum", [](const NodeInfo& n) -> Result<Compiled> {
    std::string eq = n.String("equation", "");
    eq.erase(std::remove(eq.begin(), eq.end(), ' '), eq.end());
    return Make([eq](Args in, Outs out) -> Status {
      std::vector<at::Tensor> xs;
      for (size_t i = 0; i < in.size(); ++i) {
        INFERD_ASSIGN_OR_RETURN(at::Tensor t, In(in, i));
        xs.push_back(t);
      }
      out[0] = Value::Of(at::einsum(eq, xs));
      return Status::OK();
    });
  });
  r.Add("", "LRN", [](const NodeInfo& n) -> Result<Compiled> {
    const double alpha = n.Float("alpha", 1e-4f), beta = n.Float("beta", 0.75f), bias = n.Float("bias", 1.0f);
    const int64_t size = n.Int("size", 1);
    return Make([alpha, beta, bias, size](Args in, Outs out) -> Status {
      INFERD_ASSIGN_OR_RETURN(at::Tensor x, In(in, 0));
      const int64_t C = x.size(1);
      at::Tensor sq = x * x;
      at::Tensor sum = at::zeros_like(x);
      const int64_t before = (size - 1) / 2, after = size - 1 - before;
      for (int64_t c = 0; c < C; ++c) {
        const int64_t lo = std::max<int64_t>(0, c - before), hi = std::min<int64_t>(C - 1, c + after);
        sum.select(1, c).copy_(sq.slice(1, lo, hi + 1).sum(1));
      }
      out[0] = Value::Of(x / at::pow(sum * (alpha / size) + bias, beta));
      return Status::OK();
    });
  });
  r.Add("", "MeanVarianceNormalization", [](const NodeInfo& n) -> Result<Compiled> {
    std::vector<int64_t> axes = n.Ints("axes");
    if (axes.empty()) axes = {0, 2, 3};
    return Make([axes](Args in, Outs out) -> Status {
      INFERD_ASSIGN_OR_RETURN(at::Tensor x, In(in, 0));
      at::Tensor mean = x.mean(axes, true);
      at::Tensor var = (x * x).mean(axes, true) - mean * mean;
      out[0] = Value::Of((x - mean) / at::sqrt(var + 1e-9));
      return Status::OK();
    });
  });
}

}  // namespace inferd::onnxexec::ops
