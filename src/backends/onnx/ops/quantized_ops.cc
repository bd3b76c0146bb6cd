// ONNX's quantisation operators, so that models already quantised (by ONNX
// Runtime's quantize_static / quantize_dynamic, or exported as QDQ graphs)
// load and compute what the specification says:
//
//   QuantizeLinear, DequantizeLinear (per tensor, or per axis from opset 13),
//   DynamicQuantizeLinear, MatMulInteger, ConvInteger, QLinearMatMul,
//   QLinearConv.
//
// Reference kernels: integer products computed exactly in double precision
// (exact up to 2^53, far beyond int8 x int8 sums), rounding half to even as the
// specification asks, saturating to the output type. A QDQ model's
// DequantizeLinear of a constant weight is folded at load (the plan folds
// nodes whose inputs are all constant), which leaves an FP32 MatMul or Conv
// on the dequantised weights: with `quantization: "int8"` those run on the
// int8 kernels like any other model's (docs/quantization.md).
#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "backends/onnx/ops/op_util.h"

namespace inferd::onnxexec::ops {
namespace {

using Args = const std::vector<const Value*>&;
using Outs = std::vector<Value>&;

bool IsByte(const at::Tensor& t) { return t.scalar_type() == at::kByte || t.scalar_type() == at::kChar; }

Status NeedByte(const at::Tensor& t, const char* what) {
  if (!IsByte(t)) {
    return Status::InvalidArgument(std::string(what) + " must be uint8 or int8, got " +
                                   std::string(c10::toString(t.scalar_type())));
  }
  return Status::OK();
}

// Rounds half to even and saturates to `type`'s range (uint8, int8, int32).
at::Tensor Saturate(const at::Tensor& v, at::ScalarType type) {
  double lo = 0, hi = 255;
  if (type == at::kChar) lo = -128, hi = 127;
  if (type == at::kInt) lo = -2147483648.0, hi = 2147483647.0;
  return at::clamp(at::round(v), lo, hi).to(type);
}

// A scale or zero point for `x` along `axis`: a scalar (or 1-element) as is; a 1-D tensor of x.size(axis) values
// shaped to broadcast along that axis.
Result<at::Tensor> AlongAxis(const at::Tensor& p, const at::Tensor& x, int64_t axis, const char* what) {
  if (p.numel() == 1) return p.reshape({});
  if (p.dim() != 1) return Status::InvalidArgument(std::string(what) + " must be a scalar or 1-D");
  INFERD_ASSIGN_OR_RETURN(int64_t a, Axis(axis, x.dim()));
  if (p.size(0) != x.size(a)) {
    return Status::InvalidArgument(std::string(what) + " has " + std::to_string(p.size(0)) + " values for axis " +
                                   std::to_string(a) + " of size " + std::to_string(x.size(a)));
  }
  std::vector<int64_t> shape(static_cast<size_t>(x.dim()), 1);
  shape[static_cast<size_t>(a)] = p.size(0);
  return p.reshape(shape);
}

Status PositiveScale(const at::Tensor& s) {
  if (!at::isFloatingType(s.scalar_type())) return Status::InvalidArgument("scale must be a float tensor");
  if (s.numel() == 0 || !at::all(s > 0).item<bool>()) return Status::InvalidArgument("scales must be positive");
  return Status::OK();
}

// x - zero point (optional input i; 0 when absent) as double. The zero point is a scalar, or per `axis` of x.
Result<at::Tensor> Centered(const at::Tensor& x, Args in, size_t i, int64_t axis, const char* what) {
  at::Tensor d = x.to(at::kDouble);
  if (!Present(in, i)) return d;
  INFERD_ASSIGN_OR_RETURN(at::Tensor zp, In(in, i));
  if (zp.scalar_type() != x.scalar_type())
    return Status::InvalidArgument(std::string(what) + " type differs from its input's");
  INFERD_ASSIGN_OR_RETURN(at::Tensor z, AlongAxis(zp.to(at::kDouble), x, axis, what));
  return d - z;
}

// MatMulInteger's and QLinearMatMul's zero points: a's per row (axis -2), b's per column (axis -1).
Result<at::Tensor> IntegerProduct(const at::Tensor& a, const at::Tensor& b, Args in, size_t a_zp, size_t b_zp) {
  INFERD_RETURN_IF_ERROR(NeedByte(a, "A"));
  INFERD_RETURN_IF_ERROR(NeedByte(b, "B"));
  if (a.dim() < 1 || b.dim() < 1) return Status::InvalidArgument("MatMul of a scalar");
  INFERD_ASSIGN_OR_RETURN(at::Tensor ac, Centered(a, in, a_zp, a.dim() >= 2 ? -2 : 0, "a_zero_point"));
  INFERD_ASSIGN_OR_RETURN(at::Tensor bc, Centered(b, in, b_zp, -1, "b_zero_point"));
  const int64_t k = a.size(-1), kb = b.dim() >= 2 ? b.size(-2) : b.size(0);
  if (k != kb) return Status::InvalidArgument("MatMul of " + c10::str(a.sizes()) + " and " + c10::str(b.sizes()));
  return at::matmul(ac, bc);
}

// Runs the standard Conv kernel `conv` on double tensors: x - x_zp and w - w_zp (w_zp per output channel).
Result<at::Tensor> IntegerConv(const Kernel& conv, const at::Tensor& x, const at::Tensor& w, Args in, size_t x_zp,
                               size_t w_zp) {
  INFERD_RETURN_IF_ERROR(NeedByte(x, "x"));
  INFERD_RETURN_IF_ERROR(NeedByte(w, "w"));
  if (x.dim() < 3 || w.dim() != x.dim()) return Status::InvalidArgument("Conv input and weight ranks do not match");
  INFERD_ASSIGN_OR_RETURN(at::Tensor xc, Centered(x, in, x_zp, 1, "x_zero_point"));
  INFERD_ASSIGN_OR_RETURN(at::Tensor wc, Centered(w, in, w_zp, 0, "w_zero_point"));
  const Value xv = Value::Of(xc), wv = Value::Of(wc);
  std::vector<Value> out(1);
  INFERD_RETURN_IF_ERROR(conv({&xv, &wv}, out));
  return out[0].tensor();
}

// y = saturate(round(acc * scale / y_scale) + y_zp) for QLinearMatMul and QLinearConv; `scale` broadcasts to acc.
Result<at::Tensor> Requantize(const at::Tensor& acc, const at::Tensor& scale, Args in, size_t y_scale, size_t y_zp) {
  INFERD_ASSIGN_OR_RETURN(at::Tensor ys, In(in, y_scale));
  INFERD_ASSIGN_OR_RETURN(at::Tensor yz, In(in, y_zp));
  INFERD_RETURN_IF_ERROR(PositiveScale(ys));
  INFERD_RETURN_IF_ERROR(NeedByte(yz, "y_zero_point"));
  if (ys.numel() != 1 || yz.numel() != 1) return Status::InvalidArgument("y_scale and y_zero_point must be scalars");
  return Saturate(acc * scale / ys.to(at::kDouble).reshape({}) + yz.to(at::kDouble).reshape({}), yz.scalar_type());
}

Result<at::Tensor> Scale(Args in, size_t i) {
  INFERD_ASSIGN_OR_RETURN(at::Tensor s, In(in, i));
  INFERD_RETURN_IF_ERROR(PositiveScale(s));
  return s.to(at::kDouble);
}

}  // namespace

void RegisterQuantizedOps(OpRegistry& r) {
  r.Add("", "QuantizeLinear", [](const NodeInfo& n) -> Result<Compiled> {
    const int64_t axis = n.opset() >= 13 ? n.Int("axis", 1) : 1;
    return Make([axis](Args in, Outs out) -> Status {
      INFERD_ASSIGN_OR_RETURN(at::Tensor x, In(in, 0));
      INFERD_ASSIGN_OR_RETURN(at::Tensor s, In(in, 1));
      INFERD_RETURN_IF_ERROR(PositiveScale(s));
      if (!at::isFloatingType(x.scalar_type()) && x.scalar_type() != at::kInt)
        return Status::InvalidArgument("QuantizeLinear takes a float or int32 input");
      at::ScalarType type = at::kByte;
      at::Tensor zp = at::zeros({}, at::kDouble);
      if (Present(in, 2)) {
        INFERD_ASSIGN_OR_RETURN(at::Tensor z, In(in, 2));
        INFERD_RETURN_IF_ERROR(NeedByte(z, "y_zero_point"));
        type = z.scalar_type();
        INFERD_ASSIGN_OR_RETURN(zp, AlongAxis(z.to(at::kDouble), x, axis, "y_zero_point"));
      }
      // x / scale in the scale's precision (float32), as the specification's reference divides.
      INFERD_ASSIGN_OR_RETURN(at::Tensor sa, AlongAxis(s, x, axis, "y_scale"));
      out[0] = Value::Of(Saturate(at::round(x.to(s.scalar_type()) / sa).to(at::kDouble) + zp, type));
      return Status::OK();
    });
  });
  r.Add("", "DequantizeLinear", [](const NodeInfo& n) -> Result<Compiled> {
    const int64_t axis = n.opset() >= 13 ? n.Int("axis", 1) : 1;
    return Make([axis](Args in, Outs out) -> Status {
      INFERD_ASSIGN_OR_RETURN(at::Tensor x, In(in, 0));
      INFERD_ASSIGN_OR_RETURN(at::Tensor s, In(in, 1));
      INFERD_RETURN_IF_ERROR(PositiveScale(s));
      if (!IsByte(x) && x.scalar_type() != at::kInt)
        return Status::InvalidArgument("DequantizeLinear takes a uint8, int8 or int32 input");
      INFERD_ASSIGN_OR_RETURN(at::Tensor xc, Centered(x, in, 2, axis, "x_zero_point"));
      INFERD_ASSIGN_OR_RETURN(at::Tensor sa, AlongAxis(s.to(at::kDouble), x, axis, "x_scale"));
      out[0] = Value::Of((xc * sa).to(s.scalar_type()));
      return Status::OK();
    });
  });
  r.Add("", "DynamicQuantizeLinear", [](const NodeInfo&) -> Result<Compiled> {
    return Make([](Args in, Outs out) -> Status {
      INFERD_ASSIGN_OR_RETURN(at::Tensor x, In(in, 0));
      if (x.scalar_type() != at::kFloat) return Status::InvalidArgument("DynamicQuantizeLinear takes a float input");
      if (x.numel() > 0 && !at::isfinite(x).all().item<bool>())
        return Status::InvalidArgument("DynamicQuantizeLinear of a value that is not finite");
      // In float32, as the specification's reference computes it (x / scale rounds differently in double).
      const float lo = x.numel() ? std::min(0.0f, x.min().item<float>()) : 0.0f;
      const float hi = x.numel() ? std::max(0.0f, x.max().item<float>()) : 0.0f;
      const float scale = (hi - lo) / 255.0f;
      const float zp = scale > 0 ? std::clamp(std::nearbyint(-lo / scale), 0.0f, 255.0f) : 0.0f;
      out[0] = Value::Of(scale > 0 ? Saturate(at::round(x / scale) + zp, at::kByte) : at::zeros_like(x, at::kByte));
      out[1] = Value::Of(at::scalar_tensor(scale, at::kFloat));
      out[2] = Value::Of(at::scalar_tensor(zp, at::kByte));
      return Status::OK();
    });
  });
  r.Add("", "MatMulInteger", [](const NodeInfo&) -> Result<Compiled> {
    return Make([](Args in, Outs out) -> Status {
      INFERD_ASSIGN_OR_RETURN(at::Tensor a, In(in, 0));
      INFERD_ASSIGN_OR_RETURN(at::Tensor b, In(in, 1));
      INFERD_ASSIGN_OR_RETURN(at::Tensor acc, IntegerProduct(a, b, in, 2, 3));
      out[0] = Value::Of(acc.to(at::kInt));
      return Status::OK();
    });
  });
  r.Add("", "QLinearMatMul", [](const NodeInfo&) -> Result<Compiled> {
    return Make([](Args in, Outs out) -> Status {
      INFERD_ASSIGN_OR_RETURN(at::Tensor a, In(in, 0));
      INFERD_ASSIGN_OR_RETURN(at::Tensor b, In(in, 3));
      INFERD_ASSIGN_OR_RETURN(at::Tensor acc, IntegerProduct(a, b, in, 2, 5));
      INFERD_ASSIGN_OR_RETURN(at::Tensor as, Scale(in, 1));
      INFERD_ASSIGN_OR_RETURN(at::Tensor bs, Scale(in, 4));
      INFERD_ASSIGN_OR_RETURN(as, AlongAxis(as, a, a.dim() >= 2 ? -2 : 0, "a_scale"));
      INFERD_ASSIGN_OR_RETURN(bs, AlongAxis(bs, b, -1, "b_scale"));
      INFERD_ASSIGN_OR_RETURN(at::Tensor y, Requantize(acc, as * bs, in, 6, 7));
      out[0] = Value::Of(std::move(y));
      return Status::OK();
    });
  });
  const Builder conv = *r.Find("", "Conv");
  r.Add("", "ConvInteger", [conv](const NodeInfo& n) -> Result<Compiled> {
    INFERD_ASSIGN_OR_RETURN(Compiled c, conv(n));
    return Make([k = std::move(c.kernel)](Args in, Outs out) -> Status {
      INFERD_ASSIGN_OR_RETURN(at::Tensor x, In(in, 0));
      INFERD_ASSIGN_OR_RETURN(at::Tensor w, In(in, 1));
      INFERD_ASSIGN_OR_RETURN(at::Tensor acc, IntegerConv(k, x, w, in, 2, 3));
      out[0] = Value::Of(acc.round().to(at::kInt));
      return Status::OK();
    });
  });
  r.Add("", "QLinearConv", [conv](const NodeInfo& n) -> Result<Compiled> {
    INFERD_ASSIGN_OR_RETURN(Compiled c, conv(n));
    return Make([k = std::move(c.kernel)](Args in, Outs out) -> Status {
      INFERD_ASSIGN_OR_RETURN(at::Tensor x, In(in, 0));
      INFERD_ASSIGN_OR_RETURN(at::Tensor w, In(in, 3));
      INFERD_ASSIGN_OR_RETURN(at::Tensor acc, IntegerConv(k, x, w, in, 2, 5));
      INFERD_ASSIGN_OR_RETURN(at::Tensor xs, Scale(in, 1));
      INFERD_ASSIGN_OR_RETURN(at::Tensor ws, Scale(in, 4));
      if (xs.numel() != 1) return Status::InvalidArgument("x_scale must be a scalar");
      // Per output channel (dimension 1 of the output).
      std::vector<int64_t> per_channel(static_cast<size_t>(acc.dim()), 1);
      per_channel[1] = -1;
      if (ws.numel() != 1 && ws.numel() != acc.size(1))
        return Status::InvalidArgument("w_scale must be a scalar or one value per output channel");
      if (Present(in, 8)) {
        INFERD_ASSIGN_OR_RETURN(at::Tensor bias, In(in, 8));
        if (bias.scalar_type() != at::kInt || bias.numel() != acc.size(1))
          return Status::InvalidArgument("B must be int32 with one value per output channel");
        acc = acc + bias.to(at::kDouble).reshape(per_channel);
      }
      const at::Tensor scale =
          ws.numel() == 1 ? xs.reshape({}) * ws.reshape({}) : xs.reshape({}) * ws.reshape(per_channel);
      INFERD_ASSIGN_OR_RETURN(at::Tensor y, Requantize(acc, scale, in, 6, 7));
      out[0] = Value::Of(std::move(y));
      return Status::OK();
    });
  });
}

}  // namespace inferd::onnxexec::ops
