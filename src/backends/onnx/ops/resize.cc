// Resize (opset 10+) and Upsample: separable interpolation, one axis at a
// time, with ONNX's coordinate transformations (half_pixel,
// pytorch_half_pixel, align_corners, asymmetric, tf_half_pixel_for_nn,
// tf_crop_and_resize), nearest modes, linear and cubic (cubic_coeff_a,
// exclude_outside) taps; neighbours past the edge repeat the edge value.
#include <cmath>

#include "backends/onnx/ops/op_util.h"

namespace inferd::onnxexec::ops {
namespace {

using Args = const std::vector<const Value*>&;
using Outs = std::vector<Value>&;

struct ResizeAttrs {
  std::string mode = "nearest", transform = "half_pixel", nearest = "round_prefer_floor";
  double cubic_a = -0.75, extrapolation = 0.0;
  bool exclude_outside = false;
};

double Original(const ResizeAttrs& a, int64_t x, double scale, int64_t in, int64_t out, double roi_start,
                double roi_end) {
  const std::string& t = a.transform;
  if (t == "half_pixel") return (x + 0.5) / scale - 0.5;
  if (t == "pytorch_half_pixel") return out > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
  if (t == "align_corners") return out == 1 ? 0.0 : static_cast<double>(x) * (in - 1) / (out - 1);
  if (t == "asymmetric") return x / scale;
  if (t == "tf_half_pixel_for_nn") return (x + 0.5) / scale;
  // tf_crop_and_resize
  return out > 1 ? roi_start * (in - 1) + x * (roi_end - roi_start) * (in - 1) / (out - 1)
                 : 0.5 * (roi_start + roi_end) * (in - 1);
}

int64_t Nearest(const std::string& mode, double x) {
  if (mode == "round_prefer_ceil") return static_cast<int64_t>(std::floor(x + 0.5));
  if (mode == "floor") return static_cast<int64_t>(std::floor(x));
  if (mode == "ceil") return static_cast<int64_t>(std::ceil(x));
  return static_cast<int64_t>(std::ceil(x - 0.5));  // round_prefer_floor
}

std::vector<double> CubicCoeffs(double r, double a) {
  auto w = [a](double x) {
    x = std::abs(x);
    if (x <= 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
    if (x < 2) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
    return 0.0;
  };
  return {w(r + 1), w(r), w(1 - r), w(2 - r)};
}

// Resizes axis `d` of x to `out` elements.
at::Tensor ResizeAxis(const at::Tensor& x, int64_t d, int64_t out, double scale, const ResizeAttrs& a, double roi_start,
                      double roi_end) {
  const int64_t in = x.size(d);
  const int taps = a.mode == "nearest" ? 1 : a.mode == "linear" ? 2 : 4;
  std::vector<std::vector<int64_t>> idx(taps, std::vector<int64_t>(out));
  std::vector<std::vector<double>> wt(taps, std::vector<double>(out));
  std::vector<bool> outside(out, false);
  for (int64_t i = 0; i < out; ++i) {
    const double xo = Original(a, i, scale, in, out, roi_start, roi_end);
    if (a.transform == "tf_crop_and_resize" && (xo < 0 || xo > in - 1)) outside[i] = true;
    if (taps == 1) {
      idx[0][i] = std::clamp<int64_t>(Nearest(a.nearest, xo), 0, in - 1);
      wt[0][i] = 1;
      continue;
    }
    const int64_t base = static_cast<int64_t>(std::floor(xo));
    const double r = xo - base;
    std::vector<double> c = taps == 2 ? std::vector<double>{1 - r, r} : CubicCoeffs(r, a.cubic_a);
    const int64_t first = taps == 2 ? base : base - 1;
    double sum = 0;
    for (int k = 0; k < taps; ++k) {
      const int64_t p = first + k;
      if (a.exclude_outside && (p < 0 || p >= in)) c[k] = 0;
      sum += c[k];
      idx[k][i] = std::clamp<int64_t>(p, 0, in - 1);
    }
    for (int k = 0; k < taps; ++k) wt[k][i] = a.exclude_outside && sum != 0 ? c[k] / sum : c[k];
  }
  std::vector<int64_t> wshape(x.dim(), 1);
  wshape[d] = out;
  at::Tensor y;
  if (taps == 1) {
    y = at::index_select(x, d, IntTensor(idx[0]));
  } else {
    const at::ScalarType compute = x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
    at::Tensor xf = x.to(compute);
    for (int k = 0; k < taps; ++k) {
      at::Tensor w = at::tensor(at::ArrayRef<double>(wt[k]), at::kDouble).to(compute).reshape(wshape);
      at::Tensor term = at::index_select(xf, d, IntTensor(idx[k])) * w;
      y = k == 0 ? term : y + term;
    }
    y = at::isIntegralType(x.scalar_type(), false) ? at::round(y).to(x.scalar_type()) : y.to(x.scalar_type());
  }
  if (a.transform == "tf_crop_and_resize") {
    std::vector<uint8_t> mask(outside.begin(), outside.end());
    at::Tensor m = at::tensor(at::ArrayRef<uint8_t>(mask), at::kByte).to(at::kBool).reshape(wshape);
    y = at::where(m, at::scalar_tensor(a.extrapolation, y.scalar_type()), y);
  }
  return y;
}

Result<Compiled> Resize(const NodeInfo& n, bool upsample) {
  ResizeAttrs a;
  a.mode = n.String("mode", "nearest");
  if (a.mode != "nearest" && a.mode != "linear" && a.mode != "cubic" && a.mode != "bilinear") {
    return n.Error("unknown mode '" + a.mode + "'");
  }
  if (a.mode == "bilinear") a.mode = "linear";
  // Upsample and Resize-10: asymmetric coordinates, nearest rounds down.
  const bool legacy = upsample || n.opset() < 11;
  a.transform = legacy ? "asymmetric" : n.String("coordinate_transformation_mode", "half_pixel");
  a.nearest = legacy ? "floor" : n.String("nearest_mode", "round_prefer_floor");
  a.cubic_a = n.Float("cubic_coeff_a", -0.75f);
  a.exclude_outside = n.Int("exclude_outside", 0) != 0;
  a.extrapolation = n.Float("extrapolation_value", 0.0f);
  const std::vector<float> attr_scales = n.Floats("scales");
  const bool scales_attr = upsample && n.opset() < 9;
  return Make([a, legacy, scales_attr, attr_scales](Args in, Outs out) -> Status {
    INFERD_ASSIGN_OR_RETURN(at::Tensor x, In(in, 0));
    const int64_t rank = x.dim();
    std::vector<double> scales;
    std::vector<int64_t> sizes;
    std::vector<double> roi;
    if (scales_attr) {
      scales.assign(attr_scales.begin(), attr_scales.end());
    } else if (legacy) {
      INFERD_ASSIGN_OR_RETURN(at::Tensor s, In(in, 1));
      at::Tensor d = s.to(at::kDouble).contiguous();
      scales.assign(d.data_ptr<double>(), d.data_ptr<double>() + d.numel());
    } else {
      if (Present(in, 1) && in[1]->tensor().numel() > 0) {
        at::Tensor d = in[1]->tensor().to(at::kDouble).contiguous();
        roi.assign(d.data_ptr<double>(), d.data_ptr<double>() + d.numel());
      }
      if (Present(in, 2) && in[2]->tensor().numel() > 0) {
        at::Tensor d = in[2]->tensor().to(at::kDouble).contiguous();
        scales.assign(d.data_ptr<double>(), d.data_ptr<double>() + d.numel());
      }
      if (Present(in, 3) && in[3]->tensor().numel() > 0) sizes = Ints(in[3]->tensor());
    }
    if (!sizes.empty()) {
      if (static_cast<int64_t>(sizes.size()) != rank)
        return Status::InvalidArgument("Resize sizes do not match the rank");
      scales.clear();
      for (int64_t d = 0; d < rank; ++d) scales.push_back(static_cast<double>(sizes[d]) / x.size(d));
    } else {
      if (static_cast<int64_t>(scales.size()) != rank)
        return Status::InvalidArgument("Resize needs one scale per dimension");
      for (int64_t d = 0; d < rank; ++d) {
        if (scales[d] <= 0) return Status::InvalidArgument("Resize scales must be positive");
        sizes.push_back(static_cast<int64_t>(std::floor(x.size(d) * scales[d])));
      }
    }
    if (a.transform == "tf_crop_and_resize" && static_cast<int64_t>(roi.size()) != 2 * rank) {
      return Status::InvalidArgument("tf_crop_and_resize needs an roi of 2 x rank values");
    }
    at::Tensor y = x;
    for (int64_t d = 0; d < rank; ++d) {
      const bool crop = a.transform == "tf_crop_and_resize";
      if (!crop && sizes[d] == x.size(d) && scales[d] == 1.0) continue;
      y = ResizeAxis(y, d, sizes[d], scales[d], a, crop ? roi[d] : 0.0, crop ? roi[d + rank] : 1.0);
    }
    out[0] = Value::Of(y);
    return Status::OK();
  });
}

}  // namespace

void RegisterResizeOps(OpRegistry& r) {
  r.Add("", "Resize", [](const NodeInfo& n) { return Resize(n, false); });
  r.Add("", "Upsample", [](const NodeInfo& n) { return Resize(n, true); });
}

}  // namespace inferd::onnxexec::ops
