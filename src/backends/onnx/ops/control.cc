// Control flow: If and Loop run compiled subgraphs (plan.h) that read names
// of the enclosing graph through the node's implicit inputs.
#include "backends/onnx/ops/op_util.h"
#include "backends/onnx/plan.h"

namespace inferd::onnxexec::ops {
namespace {

using Args = const std::vector<const Value*>&;
using Outs = std::vector<Value>&;

// Index of each of `names` in `all` (appending new ones).
std::vector<size_t> Merge(const std::vector<std::string>& names, std::vector<std::string>* all) {
  std::vector<size_t> idx;
  for (const auto& n : names) {
    auto it = std::find(all->begin(), all->end(), n);
    if (it == all->end()) {
      all->push_back(n);
      it = all->end() - 1;
    }
    idx.push_back(static_cast<size_t>(it - all->begin()));
  }
  return idx;
}

Result<Compiled> If(const NodeInfo& n) {
  std::vector<std::string> then_cap, else_cap, all;
  INFERD_ASSIGN_OR_RETURN(auto then_plan, n.Subgraph("then_branch", &then_cap));
  INFERD_ASSIGN_OR_RETURN(auto else_plan, n.Subgraph("else_branch", &else_cap));
  const std::vector<size_t> then_idx = Merge(then_cap, &all), else_idx = Merge(else_cap, &all);
  const size_t explicit_inputs = n.num_inputs();
  Compiled c;
  c.implicit_inputs = all;
  c.kernel = [then_plan, else_plan, then_idx, else_idx, explicit_inputs](Args in, Outs out) -> Status {
    INFERD_ASSIGN_OR_RETURN(at::Tensor cond, In(in, 0));
    const bool take = cond.to(at::kBool).reshape({-1})[0].item<bool>();
    const auto& plan = take ? then_plan : else_plan;
    const auto& idx = take ? then_idx : else_idx;
    std::vector<Value> args;
    for (size_t i : idx) {
      const Value* v = in[explicit_inputs + i];
      args.push_back(v ? *v : Value());
    }
    std::vector<Value> results;
    INFERD_RETURN_IF_ERROR(plan->Run(std::move(args), &results));
    if (results.size() != out.size()) return Status::InvalidArgument("If branch output count differs from the node's");
    for (size_t i = 0; i < out.size(); ++i) out[i] = std::move(results[i]);
    return Status::OK();
  };
  return c;
}

// Loop(M?, cond?, v...) with body(iter, cond, v...) -> (cond, v..., scan...).
Result<Compiled> Loop(const NodeInfo& n) {
  std::vector<std::string> cap;
  INFERD_ASSIGN_OR_RETURN(auto body, n.Subgraph("body", &cap));
  const size_t explicit_inputs = n.num_inputs();
  if (explicit_inputs < 2) return n.Error("Loop needs M and cond inputs (either may be empty)");
  const size_t carried = explicit_inputs - 2;
  if (body->input_names().size() != carried + 2) return n.Error("Loop body inputs do not match the node's");
  if (body->output_names().size() < carried + 1) return n.Error("Loop body outputs do not match the node's");
  const size_t scans = body->output_names().size() - 1 - carried;
  if (n.num_outputs() != carried + scans) {
    return n.Error("Loop has " + std::to_string(n.num_outputs()) + " outputs, its body gives " +
                   std::to_string(carried + scans) + " (loop-carried values, then scan outputs)");
  }
  Compiled c;
  c.implicit_inputs = cap;
  // Never evaluated at load: a loop without a trip count runs until its body
  // says stop, which a constant-looking graph may never do.
  c.deterministic = false;
  c.kernel = [body, explicit_inputs, carried, scans](Args in, Outs out) -> Status {
    int64_t max_trips = std::numeric_limits<int64_t>::max();
    if (Present(in, 0)) max_trips = in[0]->tensor().to(at::kLong).item<int64_t>();
    bool cond = true;
    if (Present(in, 1)) cond = in[1]->tensor().to(at::kBool).item<bool>();
    std::vector<Value> state;
    for (size_t i = 0; i < carried; ++i) state.push_back(in[2 + i] ? *in[2 + i] : Value());
    std::vector<std::vector<at::Tensor>> scan_parts(scans);
    for (int64_t it = 0; it < max_trips && cond; ++it) {
      std::vector<Value> args;
      args.push_back(Value::Of(at::scalar_tensor(it, at::kLong)));
      args.push_back(Value::Of(at::scalar_tensor(cond, at::kBool)));
      for (const auto& v : state) args.push_back(v);
      for (size_t i = explicit_inputs; i < in.size(); ++i) args.push_back(in[i] ? *in[i] : Value());
      std::vector<Value> results;
      INFERD_RETURN_IF_ERROR(body->Run(std::move(args), &results));
      if (!results[0].is_tensor()) return Status::InvalidArgument("Loop body condition is not a tensor");
      cond = results[0].tensor().to(at::kBool).item<bool>();
      for (size_t i = 0; i < carried; ++i) state[i] = std::move(results[1 + i]);
      for (size_t s = 0; s < scans; ++s) {
        const Value& v = results[1 + carried + s];
        if (!v.is_tensor()) return Status::Unimplemented("Loop scan outputs of non-tensors");
        scan_parts[s].push_back(v.tensor());
      }
    }
    for (size_t i = 0; i < carried; ++i) out[i] = std::move(state[i]);
    for (size_t s = 0; s < scans; ++s) {
      if (scan_parts[s].empty()) {
        out[carried + s] = Value::Of(at::empty({0}, at::kFloat));
      } else {
        out[carried + s] = Value::Of(at::stack(scan_parts[s], 0));
      }
    }
    return Status::OK();
  };
  return c;
}

}  // namespace

void RegisterControlOps(OpRegistry& r) {
  r.Add("", "If", If);
  r.Add("", "Loop", Loop);
}

}  // namespace inferd::onnxexec::ops
