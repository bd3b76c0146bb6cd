#include "backends/onnx/fusion.h"

#include <cmath>
#include <cstring>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace inferd::onnxexec {
namespace {

bool DefaultDomain(const onnx::NodeProto& n) { return n.domain().empty() || n.domain() == "ai.onnx"; }

// Every name a graph's subgraphs read (nodes there may see the outer names).
void SubgraphReads(const onnx::GraphProto& g, std::unordered_set<std::string>* names) {
  for (const auto& n : g.node()) {
    for (const auto& a : n.attribute()) {
      std::vector<const onnx::GraphProto*> subs;
      if (a.has_g()) subs.push_back(&a.g());
      for (const auto& s : a.graphs()) subs.push_back(&s);
      for (const auto* s : subs) {
        for (const auto& sn : s->node())
          for (const auto& in : sn.input()) names->insert(in);
        for (const auto& out : s->output()) names->insert(out.name());
        SubgraphReads(*s, names);
      }
    }
  }
}

class Fuser {
 public:
  explicit Fuser(onnx::GraphProto* g) : g_(g), removed_(g->node_size(), false) {
    for (const auto& t : g->initializer()) inits_[t.name()] = &t;
    for (int i = 0; i < g->node_size(); ++i) {
      const auto& n = g->node(i);
      if (DefaultDomain(n) && n.op_type() == "Constant" && n.output_size() == 1 && n.attribute_size() == 1 &&
          n.attribute(0).name() == "value" && n.attribute(0).has_t()) {
        inits_[n.output(0)] = &n.attribute(0).t();
      }
      // Exporters share weights through Identity nodes: their outputs are
      // the same constants.
      if (DefaultDomain(n) && n.op_type() == "Identity" && n.input_size() == 1 && n.output_size() == 1) {
        if (const auto* t = Init(n.input(0))) inits_[n.output(0)] = t;
      }
      for (const auto& in : n.input()) {
        if (in.empty()) continue;
        auto& r = readers_[in];
        if (r.count++ < 2) r.nodes[r.count - 1] = i;
      }
    }
    for (const auto& out : g->output()) readers_[out.name()].count += 2;  // never fused away
    std::unordered_set<std::string> sub;
    SubgraphReads(*g, &sub);
    for (const auto& name : sub) readers_[name].count += 2;
  }

  // Conv -> Relu and MatMul -> Add(bias).
  void FusePairs(FusionCounts* counts) {
    for (int i = 0; i < g_->node_size(); ++i) {
      if (removed_[i]) continue;
      onnx::NodeProto* first = g_->mutable_node(i);
      if (!DefaultDomain(*first) || first->output_size() != 1) continue;
      const int next = SoleReader(first->output(0));
      if (next < 0 || removed_[next]) continue;
      onnx::NodeProto* second = g_->mutable_node(next);
      if (!DefaultDomain(*second)) continue;
      if (first->op_type() == "Conv" && second->op_type() == "Relu" && second->input_size() == 1 &&
          PackableConvWeight(*first)) {
        first->set_domain(kInferdDomain);
        SetString(first, "activation", "Relu");
        first->set_output(0, second->output(0));
        removed_[next] = true;
        ++counts->conv_relu;
      } else if (first->op_type() == "MatMul" && second->op_type() == "Add" && first->input_size() == 2 &&
                 second->input_size() == 2) {
        const int64_t width = ConstantMatrixWidth(first->input(1));
        const std::string& other = second->input(0) == first->output(0) ? second->input(1) : second->input(0);
        if (width < 1 || second->input(0) == second->input(1) || !IsConstantVector(other, width)) continue;
        first->set_domain(kInferdDomain);
        first->set_op_type("Linear");
        first->add_input(other);
        first->set_output(0, second->output(0));
        removed_[next] = true;
        ++counts->matmul_add;
      }
    }
  }

  // GELU as exporters write it, x * 0.5 * (1 + erf(x / sqrt(2))) in either
  // order of the products (torch.nn.GELU: Div Erf Add Mul Mul; Hugging Face's
  // gelu: Mul(x, 0.5) beside Div Erf Add, then Mul), as one Gelu(x).
  void FuseGelu(FusionCounts* counts) {
    for (int i = 0; i < g_->node_size(); ++i) {
      if (removed_[i]) continue;
      onnx::NodeProto* scale = g_->mutable_node(i);
      if (!(Is(i, "Div") && IsScalar(scale->input(1), M_SQRT2, 1e-4)) &&
          !(Is(i, "Mul") && IsScalar(scale->input(1), M_SQRT1_2, 1e-4))) {
        continue;
      }
      const std::string x = scale->input(0);
      const int erf = SoleReader(scale->output(0));
      if (!Is(erf, "Erf")) continue;
      const int plus = SoleReader(Out(erf));
      if (!Is(plus, "Add") || !IsScalar(Other(plus, Out(erf)), 1.0, 1e-6)) continue;
      int a = -1, b = -1;
      if (!TwoReaders(x, &a, &b)) continue;
      const int other = a == i ? b : (b == i ? a : -1);
      const int product = SoleReader(Out(plus));
      if (other < 0 || !Is(product, "Mul")) continue;
      std::vector<int> gone = {erf, plus, product};
      std::string out;
      if (product == other && Other(product, Out(plus)) == x) {  // (x * (1 + erf)) * 0.5
        const int half = SoleReader(Out(product));
        if (!Is(half, "Mul") || !IsScalar(Other(half, Out(product)), 0.5, 1e-6)) continue;
        gone.push_back(half);
        out = Out(half);
      } else if (Is(other, "Mul") && IsScalar(Other(other, x), 0.5, 1e-6) && SoleReader(Out(other)) == product &&
                 Other(product, Out(plus)) == Out(other)) {  // (x * 0.5) * (1 + erf)
        gone.push_back(other);
        out = Out(product);
      } else {
        continue;
      }
      scale->set_domain(kInferdDomain);
      scale->set_op_type("Gelu");
      scale->clear_input();
      scale->add_input(x);
      scale->set_output(0, out);
      for (int k : gone) removed_[k] = true;
      ++counts->gelu;
    }
  }

  // LayerNorm over the last axis as exporters write it below opset 17:
  // (x - mean) / sqrt(mean((x - mean)^2) + eps) * gamma + beta, as one
  // LayerNormalization(x, gamma, beta).
  void FuseLayerNorm(FusionCounts* counts) {
    for (int i = 0; i < g_->node_size(); ++i) {
      if (removed_[i] || !IsLastAxisMean(i)) continue;
      onnx::NodeProto* mean = g_->mutable_node(i);
      const std::string x = mean->input(0);
      const int sub = SoleReader(Out(i));
      if (!Is(sub, "Sub") || g_->node(sub).input(0) != x || g_->node(sub).input(1) != Out(i)) continue;
      int a = -1, b = -1;
      if (!TwoReaders(Out(sub), &a, &b)) continue;
      const int pow = Is(a, "Pow") ? a : b, div = pow == a ? b : a;
      if (!Is(pow, "Pow") || g_->node(pow).input(0) != Out(sub) || !IsScalar(g_->node(pow).input(1), 2.0, 0)) continue;
      const int var = SoleReader(Out(pow));
      if (!IsLastAxisMean(var)) continue;
      const int plus = SoleReader(Out(var));
      if (!Is(plus, "Add")) continue;
      const auto eps = Scalar(Other(plus, Out(var)));
      const int root = SoleReader(Out(plus));
      if (!eps || *eps < 0 || !Is(root, "Sqrt") || SoleReader(Out(root)) != div || !Is(div, "Div") ||
          g_->node(div).input(0) != Out(sub) || g_->node(div).input(1) != Out(root)) {
        continue;
      }
      const int scale = SoleReader(Out(div));
      if (!Is(scale, "Mul")) continue;
      const std::string gamma = Other(scale, Out(div));
      const int shift = SoleReader(Out(scale));
      if (!Is(shift, "Add")) continue;
      const std::string beta = Other(shift, Out(scale));
      const auto* g = Init(gamma);
      if (!g || g->dims_size() != 1 || !IsConstantVector(gamma, g->dims(0)) || !IsConstantVector(beta, g->dims(0)))
        continue;
      mean->set_domain(kInferdDomain);
      mean->set_op_type("LayerNormalization");
      mean->clear_attribute();
      mean->clear_input();
      for (const std::string* in : {&x, &gamma, &beta}) mean->add_input(*in);
      mean->set_output(0, Out(shift));
      auto* axis = mean->add_attribute();
      axis->set_name("axis");
      axis->set_type(onnx::AttributeProto::INT);
      axis->set_i(-1);
      auto* epsilon = mean->add_attribute();
      epsilon->set_name("epsilon");
      epsilon->set_type(onnx::AttributeProto::FLOAT);
      epsilon->set_f(static_cast<float>(*eps));
      for (int k : {sub, pow, div, var, plus, root, scale, shift}) removed_[k] = true;
      ++counts->layer_norm;
    }
  }

  // Linear -> Gelu: the GELU runs inside the matrix product (a oneDNN
  // post-op).
  void FuseLinearActivation(FusionCounts* counts) {
    for (int i = 0; i < g_->node_size(); ++i) {
      if (removed_[i]) continue;
      onnx::NodeProto* linear = g_->mutable_node(i);
      if (linear->domain() != kInferdDomain || linear->op_type() != "Linear" || linear->attribute_size() != 0) continue;
      const int next = SoleReader(Out(i));
      if (next < 0 || removed_[next] || g_->node(next).domain() != kInferdDomain || g_->node(next).op_type() != "Gelu")
        continue;
      SetString(linear, "activation", "Gelu");
      linear->set_output(0, Out(next));
      removed_[next] = true;
      ++counts->linear_activation;
    }
  }

  // Drops the fused-away nodes. The order holds: a fused node sits where
  // its first node was, and every reader of its output comes after the
  // node that produced that output before.
  void Compact() {
    google::protobuf::RepeatedPtrField<onnx::NodeProto> kept;
    for (int i = 0; i < g_->node_size(); ++i)
      if (!removed_[i]) *kept.Add() = std::move(*g_->mutable_node(i));
    g_->mutable_node()->Swap(&kept);
  }

 private:
  static void SetString(onnx::NodeProto* n, const char* name, const char* value) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(value);
  }

  // Node i is a live default-domain `op` with one output (binary ops: two
  // distinct inputs).
  bool Is(int i, const char* op) const {
    if (i < 0 || removed_[i]) return false;
    const auto& n = g_->node(i);
    if (!DefaultDomain(n) || n.op_type() != op || n.output_size() != 1) return false;
    const std::string o = op;
    if (o == "Add" || o == "Sub" || o == "Mul" || o == "Div" || o == "Pow")
      return n.input_size() == 2 && n.input(0) != n.input(1);
    if (o == "Erf" || o == "Sqrt") return n.input_size() == 1;
    return true;
  }
  const std::string& Out(int i) const { return g_->node(i).output(0); }
  // A binary node's input that is not `one`.
  const std::string& Other(int i, const std::string& one) const {
    const auto& n = g_->node(i);
    return n.input(0) == one ? n.input(1) : n.input(0);
  }

  // ReduceMean over the last axis keeping it (axes as an attribute: opsets < 18).
  bool IsLastAxisMean(int i) const {
    if (!Is(i, "ReduceMean") || g_->node(i).input_size() != 1) return false;
    bool axes = false;
    for (const auto& a : g_->node(i).attribute()) {
      if (a.name() == "axes") {
        if (a.ints_size() != 1 || a.ints(0) != -1) return false;
        axes = true;
      } else if (a.name() == "keepdims") {
        if (a.i() != 1) return false;
      } else {
        return false;
      }
    }
    return axes;
  }

  // The node that alone reads `name` (once), else -1.
  int SoleReader(const std::string& name) const {
    auto r = readers_.find(name);
    return r == readers_.end() || r->second.count != 1 ? -1 : r->second.nodes[0];
  }

  // The two nodes that alone read `name` (once each), else false.
  bool TwoReaders(const std::string& name, int* a, int* b) const {
    auto r = readers_.find(name);
    if (r == readers_.end() || r->second.count != 2 || r->second.nodes[0] == r->second.nodes[1]) return false;
    *a = r->second.nodes[0];
    *b = r->second.nodes[1];
    return true;
  }

  // A constant with one float (or double) element.
  std::optional<double> Scalar(const std::string& name) const {
    const auto* t = Init(name);
    if (!t || !t->external_data().empty()) return std::nullopt;
    int64_t n = 1;
    for (int64_t d : t->dims()) n *= d;
    if (n != 1) return std::nullopt;
    if (t->data_type() == onnx::TensorProto::FLOAT) {
      if (t->float_data_size() == 1) return t->float_data(0);
      if (t->raw_data().size() == sizeof(float)) {
        float v;
        std::memcpy(&v, t->raw_data().data(), sizeof v);
        return v;
      }
    } else if (t->data_type() == onnx::TensorProto::DOUBLE) {
      if (t->double_data_size() == 1) return t->double_data(0);
      if (t->raw_data().size() == sizeof(double)) {
        double v;
        std::memcpy(&v, t->raw_data().data(), sizeof v);
        return v;
      }
    }
    return std::nullopt;
  }

  bool IsScalar(const std::string& name, double want, double tol) const {
    auto v = Scalar(name);
    return v && std::fabs(*v - want) <= tol;
  }

  const onnx::TensorProto* Init(const std::string& name) const {
    auto it = inits_.find(name);
    return it == inits_.end() ? nullptr : it->second;
  }

  bool PackableConvWeight(const onnx::NodeProto& conv) const {
    if (conv.input_size() < 2) return false;
    const auto* w = Init(conv.input(1));
    return w && w->data_type() == onnx::TensorProto::FLOAT && w->dims_size() == 4;
  }

  int64_t ConstantMatrixWidth(const std::string& name) const {
    const auto* w = Init(name);
    if (!w || w->data_type() != onnx::TensorProto::FLOAT || w->dims_size() != 2 || w->dims(0) < 1) return -1;
    return w->dims(1);
  }

  bool IsConstantVector(const std::string& name, int64_t width) const {
    const auto* b = Init(name);
    return b && b->data_type() == onnx::TensorProto::FLOAT && b->dims_size() == 1 && b->dims(0) == width;
  }

  onnx::GraphProto* g_;
  std::vector<bool> removed_;
  std::unordered_map<std::string, const onnx::TensorProto*> inits_;
  struct Readers {
    int count = 0;
    int nodes[2] = {-1, -1};  // the first two nodes reading the name
  };
  std::unordered_map<std::string, Readers> readers_;
};

}  // namespace

FusionCounts FuseNodes(onnx::ModelProto* model) {
  // Each pass sees the graph the one before left (and counts readers anew).
  using Pass = void (Fuser::*)(FusionCounts*);
  FusionCounts counts;
  for (Pass pass : {&Fuser::FuseGelu, &Fuser::FuseLayerNorm, &Fuser::FusePairs, &Fuser::FuseLinearActivation}) {
    const int before = counts.total();
    Fuser f(model->mutable_graph());
    (f.*pass)(&counts);
    if (counts.total() > before) f.Compact();
  }
  if (counts.total() > 0) {
    bool imported = false;
    for (const auto& o : model->opset_import()) imported = imported || o.domain() == kInferdDomain;
    if (!imported) {
      auto* o = model->add_opset_import();
      o->set_domain(kInferdDomain);
      o->set_version(1);
    }
  }
  return counts;
}

}  // namespace inferd::onnxexec
