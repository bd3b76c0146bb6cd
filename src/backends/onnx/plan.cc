#include "backends/onnx/plan.h"

#include <ATen/core/grad_mode.h>
#include <c10/core/InferenceMode.h>
#include <c10/util/Exception.h>

#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "backends/onnx/tensor_proto.h"

namespace inferd::onnxexec {

// ---- NodeInfo ----

std::string NodeInfo::Where() const {
  std::string s = "node '" + proto_.name() + "' (" + proto_.op_type();
  if (!proto_.domain().empty() && proto_.domain() != "ai.onnx") s += ", domain " + proto_.domain();
  return s + ", opset " + std::to_string(opset_) + ")";
}

const StaticInfo& NodeInfo::input_info(size_t i) const {
  static const StaticInfo kNone;
  return i < in_info_.size() ? in_info_[i] : kNone;
}

const StaticInfo& NodeInfo::output_info(size_t i) const {
  static const StaticInfo kNone;
  return i < out_info_.size() ? out_info_[i] : kNone;
}

const onnx::AttributeProto* NodeInfo::Find(const std::string& name) const {
  for (const auto& a : proto_.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

int64_t NodeInfo::Int(const std::string& name, int64_t fallback) const {
  const auto* a = Find(name);
  return a ? a->i() : fallback;
}

float NodeInfo::Float(const std::string& name, float fallback) const {
  const auto* a = Find(name);
  return a ? a->f() : fallback;
}

std::string NodeInfo::String(const std::string& name, const std::string& fallback) const {
  const auto* a = Find(name);
  return a ? a->s() : fallback;
}

std::vector<int64_t> NodeInfo::Ints(const std::string& name) const {
  const auto* a = Find(name);
  return a ? std::vector<int64_t>(a->ints().begin(), a->ints().end()) : std::vector<int64_t>{};
}

std::vector<float> NodeInfo::Floats(const std::string& name) const {
  const auto* a = Find(name);
  return a ? std::vector<float>(a->floats().begin(), a->floats().end()) : std::vector<float>{};
}

std::vector<std::string> NodeInfo::Strings(const std::string& name) const {
  const auto* a = Find(name);
  return a ? std::vector<std::string>(a->strings().begin(), a->strings().end()) : std::vector<std::string>{};
}

Result<Value> NodeInfo::TensorAttr(const std::string& name) const {
  const auto* a = Find(name);
  if (!a || !a->has_t()) return Error("attribute '" + name + "' is not a tensor");
  auto v = FromTensorProto(a->t());
  if (!v.ok()) return Error(v.status().message());
  return v;
}

Result<std::shared_ptr<const Plan>> NodeInfo::Subgraph(const std::string& attr,
                                                       std::vector<std::string>* captured) const {
  const auto* a = Find(attr);
  if (!a || !a->has_g()) return Error("attribute '" + attr + "' is not a graph");
  auto plan = Plan::Compile(a->g(), ctx_, &scope_);
  if (!plan.ok()) return plan.status().WithPrefix(Where() + " subgraph '" + attr + "'");
  *captured = (*plan)->captured();
  return plan;
}

std::vector<std::string> OpRegistry::Ops(const std::string& domain) const {
  std::vector<std::string> out;
  for (const auto& [key, b] : builders_)
    if (key.first == domain) out.push_back(key.second);
  return out;
}

// ---- Compile ----

class PlanBuilder final : public Scope {
 public:
  PlanBuilder(const CompileContext& ctx, const Scope* outer) : ctx_(ctx), outer_(outer) {}

  bool Has(const std::string& name) const override { return slots_.count(name) > 0 || (outer_ && outer_->Has(name)); }

  Result<std::shared_ptr<const Plan>> Build(const onnx::GraphProto& g) {
    plan_ = std::make_shared<Plan>();
    if (g.sparse_initializer_size() > 0) return Status::InvalidArgument("sparse initializers are not supported");
    for (const auto& init : g.initializer()) {
      if (slots_.count(init.name())) return Status::InvalidArgument("initializer '" + init.name() + "' repeats");
      auto v = FromTensorProto(init);
      if (!v.ok()) return v.status().WithPrefix("initializer");
      const int s = NewSlot(init.name());
      constant_[s] = std::move(*v);
    }
    for (const auto& in : g.input()) {
      if (slots_.count(in.name())) continue;  // an initializer listed as input (IR < 4): a constant here
      plan_->input_names_.push_back(in.name());
      plan_->input_slots_.push_back(NewSlot(in.name()));
    }
    for (const auto& node : g.node()) INFERD_RETURN_IF_ERROR(AddNode(node));
    for (const auto& out : g.output()) {
      INFERD_ASSIGN_OR_RETURN(int s, Resolve(out.name(), "graph output"));
      plan_->output_names_.push_back(out.name());
      plan_->output_slots_.push_back(s);
    }
    Finish();
    return std::shared_ptr<const Plan>(plan_);
  }

 private:
  int NewSlot(const std::string& name) {
    const int s = static_cast<int>(plan_->num_slots_++);
    slots_[name] = s;
    return s;
  }

  Result<int> Resolve(const std::string& name, const std::string& what) {
    auto it = slots_.find(name);
    if (it != slots_.end()) return it->second;
    if (outer_ && outer_->Has(name)) {
      const int s = NewSlot(name);
      plan_->captured_.push_back(name);
      plan_->captured_slots_.push_back(s);
      return s;
    }
    return Status::InvalidArgument(what + " '" + name +
                                   "' is not a graph input, an initializer or the output of an earlier node");
  }

  Status AddNode(const onnx::NodeProto& node) {
    const std::string domain = node.domain() == "ai.onnx" ? "" : node.domain();
    auto os = ctx_.opsets.find(domain);
    const int opset = os == ctx_.opsets.end() ? -1 : os->second;
    const std::string where = "node '" + node.name() + "' (" + node.op_type() +
                              (domain.empty() ? "" : ", domain " + domain) + ", opset " + std::to_string(opset) + ")";
    if (opset < 0) return Status::InvalidArgument(where + ": the model imports no opset for this domain");
    const Builder* builder = ctx_.ops->Find(domain, node.op_type());
    if (!builder) return Status::Unimplemented(where + ": operator not supported by inferd's ONNX executor");
    std::vector<int> in;
    std::vector<const Value*> constants;
    std::vector<StaticInfo> in_info, out_info;
    bool all_constant = true;
    for (const auto& name : node.input()) {
      if (name.empty()) {
        in.push_back(-1);
        constants.push_back(nullptr);
        in_info.push_back({});
        continue;
      }
      INFERD_ASSIGN_OR_RETURN(int s, Resolve(name, where + ": input"));
      in.push_back(s);
      auto c = constant_.find(s);
      constants.push_back(c == constant_.end() ? nullptr : &c->second);
      all_constant = all_constant && c != constant_.end();
      in_info.push_back(Info(name, c == constant_.end() ? nullptr : &c->second));
    }
    for (const auto& name : node.output()) out_info.push_back(Info(name, nullptr));
    NodeInfo info(node, opset, ctx_, *this, constants, in_info, out_info);
    Result<Compiled> compiled = Status::OK();
    try {
      compiled = (*builder)(info);
    } catch (const std::exception& e) {
      return Status::InvalidArgument(where + ": " + e.what());
    }
    if (!compiled.ok()) return compiled.status();
    for (const auto& name : compiled->grad_inputs) {
      auto it = std::find(plan_->input_names_.begin(), plan_->input_names_.end(), name);
      if (it == plan_->input_names_.end()) {
        return Status::InvalidArgument(where + ": gradients are only available for graph inputs, not '" + name + "'");
      }
      plan_->grad_slots_.push_back(plan_->input_slots_[it - plan_->input_names_.begin()]);
    }
    if (!compiled->grad_inputs.empty()) all_constant = false;
    for (size_t i : compiled->baked_inputs)
      if (i < in.size()) in[i] = -1;
    for (const auto& name : compiled->implicit_inputs) {
      INFERD_ASSIGN_OR_RETURN(int s, Resolve(name, where + ": captured name"));
      in.push_back(s);
      all_constant = all_constant && constant_.count(s) > 0;
    }
    std::vector<int> out;
    for (const auto& name : node.output()) {
      if (name.empty()) {
        out.push_back(-1);
        continue;
      }
      if (slots_.count(name)) return Status::InvalidArgument(where + ": output '" + name + "' is produced twice");
      out.push_back(NewSlot(name));
    }
    if (all_constant && compiled->deterministic) {
      // Fold: run now, keep the results as constants.
      std::vector<const Value*> args;
      for (int s : in) args.push_back(s < 0 ? nullptr : &constant_.at(s));
      std::vector<Value> results(out.size());
      Status st;
      try {
        st = compiled->kernel(args, results);
      } catch (const std::exception& e) {
        st = Status::InvalidArgument(e.what());
      }
      if (!st.ok()) return st.WithPrefix(where + " (evaluated at load)");
      for (size_t i = 0; i < out.size(); ++i)
        if (out[i] >= 0) constant_[out[i]] = std::move(results[i]);
      ++plan_->folded_;
      return Status::OK();
    }
    plan_->steps_.push_back({std::move(compiled->kernel), std::move(in), std::move(out), {}, where});
    return Status::OK();
  }

  StaticInfo Info(const std::string& name, const Value* constant) const {
    StaticInfo s;
    if (constant && constant->is_tensor()) {
      s.elem_type = OnnxTypeOf(constant->tensor().scalar_type());
      s.shape = constant->tensor().sizes().vec();
      return s;
    }
    auto it = ctx_.infos.find(name);
    return it == ctx_.infos.end() ? s : it->second;
  }

  // Constants into the plan; after which step each value is last read.
  void Finish() {
    std::unordered_set<int> keep(plan_->output_slots_.begin(), plan_->output_slots_.end());
    std::vector<int> last(plan_->num_slots_, -1);
    for (size_t i = 0; i < plan_->steps_.size(); ++i)
      for (int s : plan_->steps_[i].in)
        if (s >= 0) last[s] = static_cast<int>(i);
    for (size_t s = 0; s < last.size(); ++s)
      if (last[s] >= 0 && !keep.count(static_cast<int>(s)))
        plan_->steps_[last[s]].release.push_back(static_cast<int>(s));
    // Outputs of steps nobody reads (and that are not graph outputs) go at once.
    for (size_t i = 0; i < plan_->steps_.size(); ++i)
      for (int s : plan_->steps_[i].out)
        if (s >= 0 && last[s] < 0 && !keep.count(s)) plan_->steps_[i].release.push_back(s);
    for (auto& [slot, v] : constant_) {
      const bool used = last[slot] >= 0 || keep.count(slot);
      if (used) plan_->constants_.emplace_back(slot, std::move(v));
    }
  }

  const CompileContext& ctx_;
  const Scope* outer_;
  std::shared_ptr<Plan> plan_;
  std::unordered_map<std::string, int> slots_;
  std::unordered_map<int, Value> constant_;
};

Result<std::shared_ptr<const Plan>> Plan::Compile(const onnx::GraphProto& graph, const CompileContext& ctx,
                                                  const Scope* outer) {
  PlanBuilder b(ctx, outer);
  return b.Build(graph);
}

Status Plan::Run(std::vector<Value> inputs, std::vector<Value>* outputs) const {
  if (inputs.size() != input_slots_.size() + captured_slots_.size()) {
    return Status::Internal("graph called with " + std::to_string(inputs.size()) + " values, takes " +
                            std::to_string(input_slots_.size() + captured_slots_.size()));
  }
  // Plans with a Gradient op run with autograd on (never in serving).
  std::optional<c10::InferenceMode> no_inference;
  std::optional<at::AutoGradMode> grad;
  if (!grad_slots_.empty()) {
    no_inference.emplace(false);
    grad.emplace(true);
  }
  std::vector<Value> env(num_slots_);
  for (const auto& [slot, v] : constants_) env[slot] = v;
  for (size_t i = 0; i < input_slots_.size(); ++i) env[input_slots_[i]] = std::move(inputs[i]);
  for (size_t i = 0; i < captured_slots_.size(); ++i)
    env[captured_slots_[i]] = std::move(inputs[input_slots_.size() + i]);
  for (int s : grad_slots_) {
    if (env[s].is_tensor()) env[s] = Value::Of(env[s].tensor().clone().requires_grad_(true));
  }
  std::vector<const Value*> args;
  for (const Step& step : steps_) {
    args.clear();
    for (int s : step.in) {
      if (s < 0 || env[s].empty()) {
        args.push_back(nullptr);
        continue;
      }
      args.push_back(&env[s]);
    }
    std::vector<Value> results(step.out.size());
    Status st;
    try {
      st = step.kernel(args, results);
    } catch (const c10::Error& e) {
      st = Status::InvalidArgument(e.what_without_backtrace());
    } catch (const std::exception& e) {
      st = Status::InvalidArgument(e.what());
    }
    if (!st.ok()) return st.WithPrefix(step.where);
    for (size_t i = 0; i < step.out.size(); ++i)
      if (step.out[i] >= 0) env[step.out[i]] = std::move(results[i]);
    for (int s : step.release) env[s] = Value();
  }
  outputs->clear();
  for (size_t i = 0; i < output_slots_.size(); ++i) {
    if (env[output_slots_[i]].empty()) {
      return Status::Internal("graph output '" + output_names_[i] + "' was not produced");
    }
    if (!grad_slots_.empty() && env[output_slots_[i]].is_tensor()) {
      outputs->push_back(Value::Of(env[output_slots_[i]].tensor().detach()));
      continue;
    }
    outputs->push_back(env[output_slots_[i]]);
  }
  return Status::OK();
}

}  // namespace inferd::onnxexec
