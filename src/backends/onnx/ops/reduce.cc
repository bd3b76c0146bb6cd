// Reductions (Reduce*, ArgMax/ArgMin), CumSum, TopK.
#include <numeric>

#include "backends/onnx/ops/op_util.h"

namespace inferd::onnxexec::ops {
namespace {

using Args = const std::vector<const Value*>&;
using Outs = std::vector<Value>&;
using ReduceFn = std::function<at::Tensor(const at::Tensor&, const std::vector<int64_t>&, bool)>;

// Reduce* ops. Axes come from the attribute, or (ReduceSum from opset 13)
// from input 1; none given reduces everything unless noop_with_empty_axes.
void Reduce(OpRegistry& r, const char* name, ReduceFn fn, bool keep_int_type = true) {
  const bool sum = std::string(name) == "ReduceSum";
  r.Add("", name, [fn, sum, keep_int_type](const NodeInfo& n) -> Result<Compiled> {
    const bool from_input = sum && n.opset() >= 13;
    return Make([fn, from_input, keep_int_type, attr = n.Ints("axes"), keep = n.Int("keepdims", 1) != 0,
                 noop = n.Int("noop_with_empty_axes", 0) != 0](Args in, Outs out) -> Status {
      INFERD_ASSIGN_OR_RETURN(at::Tensor x, In(in, 0));
      std::vector<int64_t> axes = attr;
      if (from_input && Present(in, 1)) axes = Ints(in[1]->tensor());
      if (axes.empty()) {
        if (noop) {
          out[0] = Value::Of(x);
          return Status::OK();
        }
        axes.resize(x.dim());
        std::iota(axes.begin(), axes.end(), 0);
      }
      for (auto& a : axes) {
        INFERD_ASSIGN_OR_RETURN(a, Axis(a, std::max<int64_t>(x.dim(), 1)));
      }
      const bool integral = at::isIntegralType(x.scalar_type(), true);
      at::Tensor v = integral && !keep_int_type ? x.to(at::kDouble) : x;
      at::Tensor y = x.dim() == 0 ? v : fn(v, axes, keep);
      out[0] = Value::Of(integral ? y.to(x.scalar_type()) : y);
      return Status::OK();
    });
  });
}

at::Tensor ProdOver(at::Tensor x, std::vector<int64_t> axes, bool keep) {
  std::sort(axes.rbegin(), axes.rend());
  for (int64_t a : axes) x = x.prod(a, keep);
  return x;
}

void ArgReduce(OpRegistry& r, const char* name, bool max) {
  r.Add("", name, [max](const NodeInfo& n) -> Result<Compiled> {
    return Make([max, axis = n.Int("axis", 0), keep = n.Int("keepdims", 1) != 0,
                 last = n.Int("select_last_index", 0) != 0](Args in, Outs out) -> Status {
      INFERD_ASSIGN_OR_RETURN(at::Tensor x, In(in, 0));
      INFERD_ASSIGN_OR_RETURN(int64_t a, Axis(axis, std::max<int64_t>(x.dim(), 1)));
      at::Tensor v = last ? x.flip(a) : x;
      at::Tensor i = max ? at::argmax(v, a, keep) : at::argmin(v, a, keep);
      if (last) i = (x.size(a) - 1) - i;
      out[0] = Value::Of(i);
      return Status::OK();
    });
  });
}

}  // namespace

void RegisterReduceOps(OpRegistry& r) {
  Reduce(r, "ReduceSum", [](const at::Tensor& x, const std::vector<int64_t>& a, bool k) { return x.sum(a, k); });
  Reduce(
      r, "ReduceMean", [](const at::Tensor& x, const std::vector<int64_t>& a, bool k) { return x.mean(a, k); }, false);
  Reduce(r, "ReduceMax", [](const at::Tensor& x, const std::vector<int64_t>& a, bool k) { return at::amax(x, a, k); });
  Reduce(r, "ReduceMin", [](const at::Tensor& x, const std::vector<int64_t>& a, bool k) { return at::amin(x, a, k); });
  Reduce(r, "ReduceProd", ProdOver);
  Reduce(r, "ReduceL1", [](const at::Tensor& x, const std::vector<int64_t>& a, bool k) { return x.abs().sum(a, k); });
  Reduce(
      r, "ReduceL2",
      [](const at::Tensor& x, const std::vector<int64_t>& a, bool k) { return at::sqrt((x * x).sum(a, k)); }, false);
  Reduce(r, "ReduceSumSquare",
         [](const at::Tensor& x, const std::vector<int64_t>& a, bool k) { return (x * x).sum(a, k); });
  Reduce(
      r, "ReduceLogSum",
      [](const at::Tensor& x, const std::vector<int64_t>& a, bool k) { return at::log(x.sum(a, k)); }, false);
  Reduce(
      r, "ReduceLogSumExp",
      [](const at::Tensor& x, const std::vector<int64_t>& a, bool k) { return at::logsumexp(x, a, k); }, false);
  ArgReduce(r, "ArgMax", true);
  ArgReduce(r, "ArgMin", false);
  r.Add("", "CumSum", [](const NodeInfo& n) -> Result<Compiled> {
    return Make(
        [exclusive = n.Int("exclusive", 0) != 0, reverse = n.Int("reverse", 0) != 0](Args in, Outs out) -> Status {
          INFERD_ASSIGN_OR_RETURN(at::Tensor x, In(in, 0));
          INFERD_ASSIGN_OR_RETURN(at::Tensor axis_t, In(in, 1));
          INFERD_ASSIGN_OR_RETURN(int64_t a, Axis(axis_t.to(at::kLong).item<int64_t>(), x.dim()));
          at::Tensor v = reverse ? x.flip(a) : x;
          at::Tensor y = at::cumsum(v, a).to(x.scalar_type());
          if (exclusive) y = y - v;
          out[0] = Value::Of(reverse ? y.flip(a) : y);
          return Status::OK();
        });
  });
  r.Add("", "TopK", [](const NodeInfo& n) -> Result<Compiled> {
    const bool attr_k = n.opset() < 10;
    return Make([attr_k, k_attr = n.Int("k", 0), axis = n.Int("axis", -1), largest = n.Int("largest", 1) != 0,
                 sorted = n.Int("sorted", 1) != 0](Args in, Outs out) -> Status {
      INFERD_ASSIGN_OR_RETURN(at::Tensor x, In(in, 0));
      int64_t k = k_attr;
      if (!attr_k) {
        INFERD_ASSIGN_OR_RETURN(at::Tensor kt, In(in, 1));
        k = kt.to(at::kLong).reshape({-1})[0].item<int64_t>();
      }
      INFERD_ASSIGN_OR_RETURN(int64_t a, Axis(axis, x.dim()));
      if (k < 0 || k > x.size(a)) return Status::InvalidArgument("TopK k out of range");
      // Ties: the lower index first (a stable sort, then the first k).
      auto [vals, idx] = at::sort(x, /*stable=*/true, a, /*descending=*/largest);
      (void)sorted;
      out[0] = Value::Of(vals.slice(a, 0, k));
      out[1] = Value::Of(idx.slice(a, 0, k));
      return Status::OK();
    });
  });
}

}  // namespace inferd::onnxexec::ops
