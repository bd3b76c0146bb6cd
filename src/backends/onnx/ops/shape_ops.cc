// Ops that move, select or make tensors: Shape, Reshape, Transpose, Concat,
// Split, Slice, Gather*, Scatter*, Expand, Tile, Pad, Constant*, Range, ...
// Outputs may be views of inputs (values are never written to).
#include <numeric>

#include "backends/onnx/ops/op_util.h"
#include "backends/onnx/tensor_proto.h"

namespace inferd::onnxexec::ops {
namespace {

using Args = const std::vector<const Value*>&;
using Outs = std::vector<Value>&;

Result<std::vector<int64_t>> Normalize(std::vector<int64_t> axes, int64_t rank) {
  for (auto& a : axes) {
    INFERD_ASSIGN_OR_RETURN(a, Axis(a, rank));
  }
  return axes;
}

std::vector<int64_t> BroadcastShape(std::vector<int64_t> a, std::vector<int64_t> b) {
  if (a.size() < b.size()) std::swap(a, b);
  std::vector<int64_t> out = a;
  const size_t off = a.size() - b.size();
  for (size_t i = 0; i < b.size(); ++i) {
    const int64_t x = a[off + i], y = b[i];
    out[off + i] = x == 1 ? y : (y == 1 ? x : x);  // mismatches fail in expand()
  }
  return out;
}

// Indices for reflect / edge padding of one axis.
at::Tensor PadIndex(int64_t size, int64_t before, int64_t after, bool reflect) {
  std::vector<int64_t> idx;
  for (int64_t i = -before; i < size + after; ++i) {
    int64_t j = i;
    if (reflect && size > 1) {
      const int64_t period = 2 * (size - 1);
      j = ((j % period) + period) % period;
      if (j >= size) j = period - j;
    } else {
      j = std::clamp<int64_t>(j, 0, size - 1);
    }
    idx.push_back(j);
  }
  return IntTensor(idx);
}

Result<at::Tensor> Pad(const at::Tensor& x, const std::vector<int64_t>& pads, const std::string& mode, double value) {
  const int64_t rank = x.dim();
  if (static_cast<int64_t>(pads.size()) != 2 * rank) {
    return Status::InvalidArgument("pads has " + std::to_string(pads.size()) + " values for rank " +
                                   std::to_string(rank));
  }
  if (mode == "constant") {
    std::vector<int64_t> p;  // ATen: last dimension first, (before, after) pairs
    for (int64_t d = rank - 1; d >= 0; --d) {
      p.push_back(pads[d]);
      p.push_back(pads[d + rank]);
    }
    return at::constant_pad_nd(x, p, value);
  }
  if (mode != "reflect" && mode != "edge") return Status::InvalidArgument("unknown pad mode '" + mode + "'");
  at::Tensor y = x;
  for (int64_t d = 0; d < rank; ++d) {
    if (pads[d] == 0 && pads[d + rank] == 0) continue;
    if (pads[d] < 0 || pads[d + rank] < 0) return Status::InvalidArgument("negative pads need mode constant");
    if (y.size(d) == 0) return Status::InvalidArgument("cannot pad an empty axis by " + mode);
    y = at::index_select(y, d, PadIndex(y.size(d), pads[d], pads[d + rank], mode == "reflect"));
  }
  return y;
}

Result<at::Tensor> Slice(at::Tensor x, const std::vector<int64_t>& starts, const std::vector<int64_t>& ends,
                         std::vector<int64_t> axes, std::vector<int64_t> steps) {
  const int64_t rank = x.dim();
  if (axes.empty()) {
    axes.resize(starts.size());
    std::iota(axes.begin(), axes.end(), 0);
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size()) {
    return Status::InvalidArgument("starts, ends, axes and steps differ in length");
  }
  for (size_t i = 0; i < starts.size(); ++i) {
    INFERD_ASSIGN_OR_RETURN(int64_t axis, Axis(axes[i], rank));
    const int64_t dim = x.size(axis), step = steps[i];
    if (step == 0) return Status::InvalidArgument("slice step 0");
    int64_t s = starts[i], e = ends[i];
    if (s < 0) s += dim;
    if (e < 0) e += dim;
    if (step > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      x = x.slice(axis, s, std::max(s, e), step);
    } else {
      s = std::clamp<int64_t>(s, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      std::vector<int64_t> idx;
      for (int64_t j = s; j > e; j += step) idx.push_back(j);
      x = at::index_select(x, axis, IntTensor(idx));
    }
  }
  return x;
}

}  // namespace

void RegisterShapeOps(OpRegistry& r) {
  r.Add("", "Shape", [](const NodeInfo& n) -> Result<Compiled> {
    const int64_t start = n.Int("start", 0);
    const bool has_end = n.Has("end");
    const int64_t end = n.Int("end", 0);
    return Make([start, has_end, end](Args in, Outs out) -> Status {
      if (!Present(in, 0)) return Status::InvalidArgument("input 0 is missing");
      std::vector<int64_t> shape = in[0]->is_strings() ? in[0]->strings().shape : in[0]->tensor().sizes().vec();
      const int64_t rank = static_cast<int64_t>(shape.size());
      int64_t s = start < 0 ? start + rank : start, e = has_end ? (end < 0 ? end + rank : end) : rank;
      s = std::clamp<int64_t>(s, 0, rank);
      e = std::clamp<int64_t>(e, 0, rank);
      out[0] = Value::Of(IntTensor(std::vector<int64_t>(shape.begin() + s, shape.begin() + std::max(s, e))));
      return Status::OK();
    });
  });
  r.Add("", "Size", [](const NodeInfo&) -> Result<Compiled> {
    return Make([](Args in, Outs out) -> Status {
      if (!Present(in, 0)) return Status::InvalidArgument("input 0 is missing");
      const int64_t n =
          in[0]->is_strings() ? static_cast<int64_t>(in[0]->strings().data.size()) : in[0]->tensor().numel();
      out[0] = Value::Of(at::scalar_tensor(n, at::kLong));
      return Status::OK();
    });
  });
  r.Add("", "Reshape", [](const NodeInfo& n) -> Result<Compiled> {
    const bool allowzero = n.Int("allowzero", 0) != 0;
    const bool attr = n.opset() < 5;
    const std::vector<int64_t> attr_shape = n.Ints("shape");
    return Make([allowzero, attr, attr_shape](Args in, Outs out) -> Status {
      INFERD_ASSIGN_OR_RETURN(at::Tensor x, In(in, 0));
      std::vector<int64_t> shape = attr_shape;
      if (!attr) {
        INFERD_ASSIGN_OR_RETURN(at::Tensor s, In(in, 1));
        shape = Ints(s);
      }
      for (size_t i = 0; i < shape.size(); ++i) {
        if (shape[i] == 0 && !allowzero) {
          if (static_cast<int64_t>(i) >= x.dim()) return Status::InvalidArgument("reshape 0 past the input's rank");
          shape[i] = x.size(static_cast<int64_t>(i));
        }
      }
      out[0] = Value::Of(x.reshape(shape));
      return Status::OK();
    });
  });
  r.Add("", "Flatten", [](const NodeInfo& n) -> Result<Compiled> {
    const int64_t axis = n.Int("axis", 1);
    return Make([axis](Args in, Outs out) -> Status {
      INFERD_ASSIGN_OR_RETURN(at::Tensor x, In(in, 0));
      const int64_t rank = x.dim();
      const int64_t a = axis < 0 ? axis + rank : axis;
      if (a < 0 || a > rank) return Status::InvalidArgument("Flatten axis out of range");
      int64_t outer = 1;
      for (int64_t d = 0; d < a; ++d) outer *= x.size(d);
      out[0] = Value::Of(x.reshape({outer, outer == 0 ? 0 : x.numel() / std::max<int64_t>(outer, 1)}));
      if (outer == 0) {
        int64_t inner = 1;
        for (int64_t d = a; d < rank; ++d) inner *= x.size(d);
        out[0] = Value::Of(x.reshape({0, inner}));
      }
      return Status::OK();
    });
  });
  r.Add("", "Squeeze", [](const NodeInfo& n) -> Result<Compiled> {
    const bool from_input = n.opset() >= 13;
    return Make([n_attr = n.Ints("axes"), has_attr = n.Has("axes"), from_input](Args in, Outs out) -> Status {
      INFERD_ASSIGN_OR_RETURN(at::Tensor x, In(in, 0));
      std::vector<int64_t> axes = n_attr;
      bool given = has_attr;
      if (from_input) {
        given = Present(in, 1);
        if (given) axes = Ints(in[1]->tensor());
      }
      if (!given) {
        out[0] = Value::Of(x.squeeze());
        return Status::OK();
      }
      INFERD_ASSIGN_OR_RETURN(axes, Normalize(axes, x.dim()));
      std::vector<int64_t> shape;
      for (int64_t d = 0; d < x.dim(); ++d) {
        if (std::find(axes.begin(), axes.end(), d) != axes.end()) {
          if (x.size(d) != 1)
            return Status::InvalidArgument("cannot squeeze axis " + std::to_string(d) + " of size " +
                                           std::to_string(x.size(d)));
          continue;
        }
        shape.push_back(x.size(d));
      }
      out[0] = Value::Of(x.reshape(shape));
      return Status::OK();
    });
  });
  r.Add("", "Unsqueeze", [](const NodeInfo& n) -> Result<Compiled> {
    const bool from_input = n.opset() >= 13;
    return Make([attr = n.Ints("axes"), from_input](Args in, Outs out) -> Status {
      INFERD_ASSIGN_OR_RETURN(at::Tensor x, In(in, 0));
      std::vector<int64_t> axes = attr;
      if (from_input) {
        INFERD_ASSIGN_OR_RETURN(at::Tensor a, In(in, 1));
        axes = Ints(a);
      }
      const int64_t rank = x.dim() + static_cast<int64_t>(axes.size());
      INFERD_ASSIGN_OR_RETURN(axes, Normalize(axes, rank));
      std::vector<int64_t> shape;
      int64_t src = 0;
      for (int64_t d = 0; d < rank; ++d) {
        if (std::find(axes.begin(), axes.end(), d) != axes.end()) {
          shape.push_back(1);
        } else {
          if (src >= x.dim()) return Status::InvalidArgument("repeated Unsqueeze axes");
          shape.push_back(x.size(src++));
        }
      }
      out[0] = Value::Of(x.reshape(shape));
      return Status::OK();
    });
  });
  r.Add("", "Transpose", [](const NodeInfo& n) -> Result<Compiled> {
    return Make([perm = n.Ints("perm")](Args in, Outs out) -> Status {
      INFERD_ASSIGN_OR_RETURN(at::Tensor x, In(in, 0));
      std::vector<int64_t> p = perm;
      if (p.empty())
        for (int64_t d = x.dim() - 1; d >= 0; --d) p.push_back(d);
      out[0] = Value::Of(x.permute(p));
      return Status::OK();
    });
  });
  r.Add("", "Concat", [](const NodeInfo& n) -> Result<Compiled> {
    if (!n.Has("axis") && n.opset() >= 4) return n.Error("attribute 'axis' is required");
    return Make([axis = n.Int("axis", 1)](Args in, Outs out) -> Status {
      std::vector<at::Tensor> parts;
      for (size_t i = 0; i < in.size(); ++i) {
        INFERD_ASSIGN_OR_RETURN(at::Tensor t, In(in, i));
        parts.push_back(t);
      }
      if (parts.empty()) return Status::InvalidArgument("Concat of nothing");
      INFERD_ASSIGN_OR_RETURN(int64_t a, Axis(axis, parts[0].dim()));
      out[0] = Value::Of(at::cat(parts, a));
      return Status::OK();
    });
  });
  r.Add("", "Split", [](const NodeInfo& n) -> Result<Compiled> {
    const bool from_input = n.opset() >= 13;
    return Make([axis = n.Int("axis", 0), attr = n.Ints("split"), from_input, outputs = n.num_outputs()](
                    Args in, Outs out) -> Status {
      INFERD_ASSIGN_OR_RETURN(at::Tensor x, In(in, 0));
      INFERD_ASSIGN_OR_RETURN(int64_t a, Axis(axis, x.dim()));
      std::vector<int64_t> sizes = attr;
      if (from_input && Present(in, 1)) sizes = Ints(in[1]->tensor());
      if (sizes.empty()) {
        const int64_t dim = x.size(a), k = static_cast<int64_t>(outputs);
        const int64_t each = (dim + k - 1) / k;
        for (int64_t i = 0; i < k; ++i) sizes.push_back(std::max<int64_t>(0, std::min(each, dim - i * each)));
      }
      if (sizes.size() != outputs) return Status::InvalidArgument("split sizes do not match the outputs");
      auto parts = at::split_with_sizes(x, sizes, a);
      for (size_t i = 0; i < parts.size(); ++i) out[i] = Value::Of(parts[i]);
      return Status::OK();
    });
  });
  r.Add("", "Slice", [](const NodeInfo& n) -> Result<Compiled> {
    const bool attrs = n.opset() < 10;
    return Make([attrs, s = n.Ints("starts"), e = n.Ints("ends"), a = n.Ints("axes")](Args in, Outs out) -> Status {
      INFERD_ASSIGN_OR_RETURN(at::Tensor x, In(in, 0));
      if (attrs) {
        INFERD_ASSIGN_OR_RETURN(at::Tensor y, Slice(x, s, e, a, {}));
        out[0] = Value::Of(y);
        return Status::OK();
      }
      INFERD_ASSIGN_OR_RETURN(at::Tensor st, In(in, 1));
      INFERD_ASSIGN_OR_RETURN(at::Tensor en, In(in, 2));
      std::vector<int64_t> axes, steps;
      if (Present(in, 3)) axes = Ints(in[3]->tensor());
      if (Present(in, 4)) steps = Ints(in[4]->tensor());
      INFERD_ASSIGN_OR_RETURN(at::Tensor y, Slice(x, Ints(st), Ints(en), axes, steps));
      out[0] = Value::Of(y);
      return Status::OK();
    });
  });
  // Gather checks up to this many indices on the host (no tensor ops).
  constexpr int64_t kHostIndices = 64;
  r.Add("", "Gather", [](const NodeInfo& n) -> Result<Compiled> {
    return Make([axis = n.Int("axis", 0)](Args in, Outs out) -> Status {
      INFERD_ASSIGN_OR_RETURN(at::Tensor x, In(in, 0));
      INFERD_ASSIGN_OR_RETURN(at::Tensor idx, In(in, 1));
      INFERD_ASSIGN_OR_RETURN(int64_t a, Axis(axis, x.dim()));
      const int64_t dim = x.size(a);
      if (idx.numel() <= kHostIndices && (idx.scalar_type() == at::kLong || idx.scalar_type() == at::kInt)) {
        // A few indices (shape arithmetic: Gather of a Shape's element):
        // checked on the host, a 0-D index as a view.
        std::vector<int64_t> v = Ints(idx);
        for (int64_t& k : v) {
          if (k < -dim || k >= dim) {
            return Status::InvalidArgument("Gather index out of range for an axis of " + std::to_string(dim));
          }
          if (k < 0) k += dim;
        }
        if (idx.dim() == 0) {
          out[0] = Value::Of(x.select(a, v[0]));
          return Status::OK();
        }
        std::vector<int64_t> shape(x.sizes().begin(), x.sizes().begin() + a);
        for (int64_t d : idx.sizes()) shape.push_back(d);
        for (int64_t d = a + 1; d < x.dim(); ++d) shape.push_back(x.size(d));
        out[0] = Value::Of(at::index_select(x, a, IntTensor(v)).reshape(shape));
        return Status::OK();
      }
      at::Tensor i = idx.to(at::kLong);
      i = at::where(i < 0, i + dim, i);
      if (i.numel() > 0 && (i.min().item<int64_t>() < 0 || i.max().item<int64_t>() >= dim)) {
        return Status::InvalidArgument("Gather index out of range for an axis of " + std::to_string(dim));
      }
      at::Tensor flat = at::index_select(x, a, i.reshape({-1}));
      std::vector<int64_t> shape(x.sizes().begin(), x.sizes().begin() + a);
      for (int64_t d : idx.sizes()) shape.push_back(d);
      for (int64_t d = a + 1; d < x.dim(); ++d) shape.push_back(x.size(d));
      out[0] = Value::Of(flat.reshape(shape));
      return Status::OK();
    });
  });
  r.Add("", "GatherElements", [](const NodeInfo& n) -> Result<Compiled> {
    return Make([axis = n.Int("axis", 0)](Args in, Outs out) -> Status {
      INFERD_ASSIGN_OR_RETURN(at::Tensor x, In(in, 0));
      INFERD_ASSIGN_OR_RETURN(at::Tensor idx, In(in, 1));
      INFERD_ASSIGN_OR_RETURN(int64_t a, Axis(axis, x.dim()));
      at::Tensor i = idx.to(at::kLong);
      i = at::where(i < 0, i + x.size(a), i);
      out[0] = Value::Of(at::gather(x, a, i));
      return Status::OK();
    });
  });
  r.Add("", "GatherND", [](const NodeInfo& n) -> Result<Compiled> {
    return Make([batch_dims = n.Int("batch_dims", 0)](Args in, Outs out) -> Status {
      INFERD_ASSIGN_OR_RETURN(at::Tensor x, In(in, 0));
      INFERD_ASSIGN_OR_RETURN(at::Tensor idx, In(in, 1));
      const int64_t b = batch_dims, k = idx.size(-1);
      if (b + k > x.dim()) return Status::InvalidArgument("GatherND index depth exceeds the data's rank");
      int64_t B = 1;
      for (int64_t d = 0; d < b; ++d) B *= x.size(d);
      std::vector<int64_t> tail(x.sizes().begin() + b + k, x.sizes().end());
      std::vector<int64_t> rest = {B, -1};
      rest.insert(rest.end(), tail.begin(), tail.end());
      at::Tensor data = x.reshape(rest);  // [B, prod(indexed dims), tail...]
      at::Tensor i = idx.to(at::kLong).reshape({B, -1, k});
      at::Tensor lin = at::zeros({B, i.size(1)}, at::kLong);
      int64_t stride = 1;
      for (int64_t j = k - 1; j >= 0; --j) {
        const int64_t dim = x.size(b + j);
        at::Tensor ij = i.select(2, j);
        ij = at::where(ij < 0, ij + dim, ij);
        lin = lin + ij * stride;
        stride *= dim;
      }
      at::Tensor rows = at::arange(B, at::kLong).unsqueeze(1).expand({B, i.size(1)});
      at::Tensor g = at::index(data, {rows, lin});
      std::vector<int64_t> shape(idx.sizes().begin(), idx.sizes().end() - 1);
      shape.insert(shape.end(), tail.begin(), tail.end());
      out[0] = Value::Of(g.reshape(shape));
      return Status::OK();
    });
  });
  r.Add("", "Expand", [](const NodeInfo&) -> Result<Compiled> {
    return Make([](Args in, Outs out) -> Status {
      INFERD_ASSIGN_OR_RETURN(at::Tensor x, In(in, 0));
      INFERD_ASSIGN_OR_RETURN(at::Tensor s, In(in, 1));
      out[0] = Value::Of(x.expand(BroadcastShape(x.sizes().vec(), Ints(s))));
      return Status::OK();
    });
  });
  r.Add("", "Tile", [](const NodeInfo&) -> Result<Compiled> {
    return Make([](Args in, Outs out) -> Status {
      INFERD_ASSIGN_OR_RETURN(at::Tensor x, In(in, 0));
      INFERD_ASSIGN_OR_RETURN(at::Tensor reps, In(in, 1));
      out[0] = Value::Of(x.repeat(Ints(reps)));
      return Status::OK();
    });
  });
  r.Add("", "Pad", [](const NodeInfo& n) -> Result<Compiled> {
    const bool attrs = n.opset() < 11;
    return Make([attrs, mode = n.String("mode", "constant"), pads_attr = n.Ints(n.opset() < 2 ? "paddings" : "pads"),
                 value_attr = n.Float("value", 0.0f)](Args in, Outs out) -> Status {
      INFERD_ASSIGN_OR_RETURN(at::Tensor x, In(in, 0));
      std::vector<int64_t> pads = pads_attr;
      double value = value_attr;
      if (!attrs) {
        INFERD_ASSIGN_OR_RETURN(at::Tensor p, In(in, 1));
        pads = Ints(p);
        value = Present(in, 2) && in[2]->tensor().numel() > 0 ? in[2]->tensor().to(at::kDouble).item<double>() : 0.0;
        if (Present(in, 3)) {  // axes (opset 18)
          std::vector<int64_t> axes = Ints(in[3]->tensor());
          std::vector<int64_t> full(2 * x.dim(), 0);
          for (size_t i = 0; i < axes.size(); ++i) {
            INFERD_ASSIGN_OR_RETURN(int64_t a, Axis(axes[i], x.dim()));
            full[a] = pads[i];
            full[a + x.dim()] = pads[i + axes.size()];
          }
          pads = full;
        }
      }
      INFERD_ASSIGN_OR_RETURN(at::Tensor y, Pad(x, pads, mode, value));
      out[0] = Value::Of(y);
      return Status::OK();
    });
  });
  r.Add("", "Constant", [](const NodeInfo& n) -> Result<Compiled> {
    Value v;
    if (n.Has("value")) {
      INFERD_ASSIGN_OR_RETURN(v, n.TensorAttr("value"));
    } else if (n.Has("value_float")) {
      v = Value::Of(at::scalar_tensor(n.Float("value_float", 0), at::kFloat));
    } else if (n.Has("value_floats")) {
      auto f = n.Floats("value_floats");
      v = Value::Of(at::tensor(at::ArrayRef<float>(f), at::kFloat));
    } else if (n.Has("value_int")) {
      v = Value::Of(at::scalar_tensor(n.Int("value_int", 0), at::kLong));
    } else if (n.Has("value_ints")) {
      v = Value::Of(IntTensor(n.Ints("value_ints")));
    } else if (n.Has("value_string")) {
      v = Value::Of(StringTensor{{}, {n.String("value_string", "")}});
    } else if (n.Has("value_strings")) {
      auto s = n.Strings("value_strings");
      v = Value::Of(StringTensor{{static_cast<int64_t>(s.size())}, s});
    } else {
      return n.Error("no supported value attribute (sparse_value is not supported)");
    }
    return Make([v](Args, Outs out) -> Status {
      out[0] = v;
      return Status::OK();
    });
  });
  r.Add("", "ConstantOfShape", [](const NodeInfo& n) -> Result<Compiled> {
    at::Tensor fill = at::zeros({1}, at::kFloat);
    if (n.Has("value")) {
      INFERD_ASSIGN_OR_RETURN(Value v, n.TensorAttr("value"));
      if (!v.is_tensor() || v.tensor().numel() != 1) return n.Error("'value' must hold one element");
      fill = v.tensor().reshape({1});
    }
    return Make([fill](Args in, Outs out) -> Status {
      INFERD_ASSIGN_OR_RETURN(at::Tensor s, In(in, 0));
      out[0] = Value::Of(fill.expand(Ints(s)).contiguous());
      return Status::OK();
    });
  });
  r.Add("", "Range", [](const NodeInfo&) -> Result<Compiled> {
    return Make([](Args in, Outs out) -> Status {
      INFERD_ASSIGN_OR_RETURN(at::Tensor s, In(in, 0));
      INFERD_ASSIGN_OR_RETURN(at::Tensor l, In(in, 1));
      INFERD_ASSIGN_OR_RETURN(at::Tensor d, In(in, 2));
      const double start = s.to(at::kDouble).item<double>(), limit = l.to(at::kDouble).item<double>(),
                   delta = d.to(at::kDouble).item<double>();
      if (delta == 0) return Status::InvalidArgument("Range delta 0");
      const int64_t count = std::max<int64_t>(0, static_cast<int64_t>(std::ceil((limit - start) / delta)));
      at::Tensor idx = at::arange(count, at::kDouble);
      if (at::isIntegralType(s.scalar_type(), false)) {
        out[0] = Value::Of((idx.to(at::kLong) * d.to(at::kLong) + s.to(at::kLong)).to(s.scalar_type()));
      } else {
        out[0] = Value::Of((s.to(at::kDouble) + idx * d.to(at::kDouble)).to(s.scalar_type()));
      }
      return Status::OK();
    });
  });
  r.Add("", "EyeLike", [](const NodeInfo& n) -> Result<Compiled> {
    const int32_t dtype = static_cast<int32_t>(n.Int("dtype", 0));
    return Make([k = n.Int("k", 0), dtype](Args in, Outs out) -> Status {
      INFERD_ASSIGN_OR_RETURN(at::Tensor x, In(in, 0));
      auto st = dtype ? ScalarTypeOf(dtype) : std::optional<at::ScalarType>(x.scalar_type());
      if (!st) return Status::InvalidArgument("EyeLike dtype not supported");
      at::Tensor e = at::ones({x.size(0), x.size(1)}, at::kDouble);
      e = k >= 0 ? at::triu(at::tril(e, k), k) : at::tril(at::triu(e, k), k);
      out[0] = Value::Of(e.to(*st));
      return Status::OK();
    });
  });
  r.Add("", "Trilu", [](const NodeInfo& n) -> Result<Compiled> {
    return Make([upper = n.Int("upper", 1) != 0](Args in, Outs out) -> Status {
      INFERD_ASSIGN_OR_RETURN(at::Tensor x, In(in, 0));
      const int64_t k = Present(in, 1) ? in[1]->tensor().to(at::kLong).item<int64_t>() : 0;
      out[0] = Value::Of(upper ? at::triu(x, k) : at::tril(x, k));
      return Status::OK();
    });
  });
  r.Add("", "DepthToSpace", [](const NodeInfo& n) -> Result<Compiled> {
    if (n.Int("blocksize", 1) < 1 || n.Int("blocksize", 1) > 4096) return n.Error("blocksize must be 1..4096");
    return Make([b = n.Int("blocksize", 1), crd = n.String("mode", "DCR") == "CRD"](Args in, Outs out) -> Status {
      INFERD_ASSIGN_OR_RETURN(at::Tensor x, In(in, 0));
      if (x.dim() != 4) return Status::InvalidArgument("DepthToSpace takes NCHW input");
      const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
      at::Tensor y = crd ? x.reshape({N, C / (b * b), b, b, H, W}).permute({0, 1, 4, 2, 5, 3})
                         : x.reshape({N, b, b, C / (b * b), H, W}).permute({0, 3, 4, 1, 5, 2});
      out[0] = Value::Of(y.reshape({N, C / (b * b), H * b, W * b}));
      return Status::OK();
    });
  });
  r.Add("", "SpaceToDepth", [](const NodeInfo& n) -> Result<Compiled> {
    if (n.Int("blocksize", 1) < 1 || n.Int("blocksize", 1) > 4096) return n.Error("blocksize must be 1..4096");
    return Make([b = n.Int("blocksize", 1)](Args in, Outs out) -> Status {
      INFERD_ASSIGN_OR_RETURN(at::Tensor x, In(in, 0));
      if (x.dim() != 4) return Status::InvalidArgument("SpaceToDepth takes NCHW input");
      const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
      at::Tensor y = x.reshape({N, C, H / b, b, W / b, b}).permute({0, 3, 5, 1, 2, 4});
      out[0] = Value::Of(y.reshape({N, C * b * b, H / b, W / b}));
      return Status::OK();
    });
  });
  r.Add("", "NonZero", [](const NodeInfo&) -> Result<Compiled> {
    return Make([](Args in, Outs out) -> Status {
      INFERD_ASSIGN_OR_RETURN(at::Tensor x, In(in, 0));
      if (x.dim() == 0) x = x.reshape({1});
      out[0] = Value::Of(at::nonzero(x).t().contiguous());
      return Status::OK();
    });
  });
  r.Add("", "Compress", [](const NodeInfo& n) -> Result<Compiled> {
    return Make([has_axis = n.Has("axis"), axis = n.Int("axis", 0)](Args in, Outs out) -> Status {
      INFERD_ASSIGN_OR_RETURN(at::Tensor x, In(in, 0));
      INFERD_ASSIGN_OR_RETURN(at::Tensor c, In(in, 1));
      at::Tensor data = has_axis ? x : x.reshape({-1});
      int64_t a = 0;
      if (has_axis) {
        INFERD_ASSIGN_OR_RETURN(a, Axis(axis, x.dim()));
      }
      at::Tensor cond = c.to(at::kBool).reshape({-1});
      if (cond.numel() > data.size(a)) cond = cond.slice(0, 0, data.size(a));
      at::Tensor idx = at::nonzero(cond).reshape({-1});
      out[0] = Value::Of(at::index_select(data, a, idx));
      return Status::OK();
    });
  });
  r.Add("", "OneHot", [](const NodeInfo& n) -> Result<Compiled> {
    return Make([axis = n.Int("axis", -1)](Args in, Outs out) -> Status {
      INFERD_ASSIGN_OR_RETURN(at::Tensor idx, In(in, 0));
      INFERD_ASSIGN_OR_RETURN(at::Tensor depth_t, In(in, 1));
      INFERD_ASSIGN_OR_RETURN(at::Tensor values, In(in, 2));
      const int64_t depth = depth_t.to(at::kDouble).item<double>();
      at::Tensor i = idx.to(at::kLong);
      i = at::where(i < 0, i + depth, i);
      at::Tensor valid = (i >= 0) & (i < depth);
      at::Tensor hot = at::one_hot(at::where(valid, i, at::zeros_like(i)), depth) * valid.unsqueeze(-1);
      const int64_t rank = idx.dim() + 1;
      INFERD_ASSIGN_OR_RETURN(int64_t a, Axis(axis, rank));
      hot = hot.movedim(-1, a);
      at::Tensor v = values.reshape({-1});
      out[0] = Value::Of(at::where(hot.to(at::kBool), v[1], v[0]));
      return Status::OK();
    });
  });
  auto scatter_elements = [](const NodeInfo& n) -> Result<Compiled> {
    const std::string reduction = n.String("reduction", "none");
    if (reduction != "none" && reduction != "add" && reduction != "mul")
      return n.Error("reduction '" + reduction + "' not supported");
    return Make([axis = n.Int("axis", 0), reduction](Args in, Outs out) -> Status {
      INFERD_ASSIGN_OR_RETURN(at::Tensor x, In(in, 0));
      INFERD_ASSIGN_OR_RETURN(at::Tensor idx, In(in, 1));
      INFERD_ASSIGN_OR_RETURN(at::Tensor upd, In(in, 2));
      INFERD_ASSIGN_OR_RETURN(int64_t a, Axis(axis, x.dim()));
      at::Tensor i = idx.to(at::kLong);
      i = at::where(i < 0, i + x.size(a), i);
      if (reduction == "none") {
        out[0] = Value::Of(at::scatter(x, a, i, upd));
      } else {
        out[0] = Value::Of(at::scatter_reduce(x, a, i, upd, reduction == "add" ? "sum" : "prod", true));
      }
      return Status::OK();
    });
  };
  r.Add("", "ScatterElements", scatter_elements);
  r.Add("", "Scatter", scatter_elements);
  r.Add("", "ScatterND", [](const NodeInfo& n) -> Result<Compiled> {
    const std::string reduction = n.String("reduction", "none");
    if (reduction != "none" && reduction != "add" && reduction != "mul")
      return n.Error("reduction '" + reduction + "' not supported");
    return Make([reduction](Args in, Outs out) -> Status {
      INFERD_ASSIGN_OR_RETURN(at::Tensor x, In(in, 0));
      INFERD_ASSIGN_OR_RETURN(at::Tensor idx, In(in, 1));
      INFERD_ASSIGN_OR_RETURN(at::Tensor upd, In(in, 2));
      const int64_t k = idx.size(-1);
      at::Tensor y = x.clone();
      std::vector<int64_t> tail(x.sizes().begin() + k, x.sizes().end());
      std::vector<int64_t> flat_shape = {-1};
      flat_shape.insert(flat_shape.end(), tail.begin(), tail.end());
      at::Tensor yf = y.view(flat_shape);
      at::Tensor i = idx.to(at::kLong).reshape({-1, k});
      at::Tensor lin = at::zeros({i.size(0)}, at::kLong);
      int64_t stride = 1;
      for (int64_t j = k - 1; j >= 0; --j) {
        at::Tensor ij = i.select(1, j);
        lin = lin + at::where(ij < 0, ij + x.size(j), ij) * stride;
        stride *= x.size(j);
      }
      at::Tensor u = upd.reshape(flat_shape);
      for (int64_t r = 0; r < lin.size(0); ++r) {
        at::Tensor row = yf[lin[r].item<int64_t>()];
        if (reduction == "none")
          row.copy_(u[r]);
        else if (reduction == "add")
          row.add_(u[r]);
        else
          row.mul_(u[r]);
      }
      out[0] = Value::Of(y);
      return Status::OK();
    });
  });
  r.Add("", "Identity", [](const NodeInfo&) -> Result<Compiled> {
    return Make([](Args in, Outs out) -> Status {
      if (!Present(in, 0)) return Status::InvalidArgument("input 0 is missing");
      out[0] = *in[0];
      return Status::OK();
    });
  });
}

}  // namespace inferd::onnxexec::ops
