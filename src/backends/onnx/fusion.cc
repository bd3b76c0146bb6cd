#include "backends/onnx/fusion.h"

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
  explicit Fuser(onnx::GraphProto* g) : g_(g) {
    for (const auto& t : g->initializer()) inits_[t.name()] = &t;
    for (int i = 0; i < g->node_size(); ++i) {
      const auto& n = g->node(i);
      // Exporters share weights through Identity nodes: their outputs are
      // the same constants.
      if (DefaultDomain(n) && n.op_type() == "Identity" && n.input_size() == 1 && n.output_size() == 1) {
        if (const auto* t = Init(n.input(0))) inits_[n.output(0)] = t;
      }
      for (const auto& in : n.input()) {
        if (in.empty()) continue;
        auto& r = readers_[in];
        if (r.count++ == 0) r.node = i;
      }
    }
    for (const auto& out : g->output()) readers_[out.name()].count += 2;  // never fused away
    std::unordered_set<std::string> sub;
    SubgraphReads(*g, &sub);
    for (const auto& name : sub) readers_[name].count += 2;
  }

  FusionCounts Run() {
    FusionCounts counts;
    std::vector<bool> removed(g_->node_size(), false);
    for (int i = 0; i < g_->node_size(); ++i) {
      if (removed[i]) continue;
      onnx::NodeProto* first = g_->mutable_node(i);
      if (!DefaultDomain(*first) || first->output_size() != 1) continue;
      const int next = SoleReader(first->output(0));
      if (next < 0 || removed[next]) continue;
      onnx::NodeProto* second = g_->mutable_node(next);
      if (!DefaultDomain(*second)) continue;
      if (first->op_type() == "Conv" && second->op_type() == "Relu" && second->input_size() == 1 &&
          PackableConvWeight(*first)) {
        first->set_domain(kInferdDomain);
        auto* a = first->add_attribute();
        a->set_name("activation");
        a->set_type(onnx::AttributeProto::STRING);
        a->set_s("Relu");
        first->set_output(0, second->output(0));
        removed[next] = true;
        ++counts.conv_relu;
      } else if (first->op_type() == "MatMul" && second->op_type() == "Add" && first->input_size() == 2 &&
                 second->input_size() == 2) {
        const int64_t width = ConstantMatrixWidth(first->input(1));
        const std::string& other = second->input(0) == first->output(0) ? second->input(1) : second->input(0);
        if (width < 1 || second->input(0) == second->input(1) || !IsConstantVector(other, width)) continue;
        first->set_domain(kInferdDomain);
        first->set_op_type("Linear");
        first->add_input(other);
        first->set_output(0, second->output(0));
        removed[next] = true;
        ++counts.matmul_add;
      }
    }
    if (counts.total() == 0) return counts;
    // Keep the order: the fused node sits where the first one was, and every
    // reader of the second node's output comes after the second node.
    google::protobuf::RepeatedPtrField<onnx::NodeProto> kept;
    for (int i = 0; i < g_->node_size(); ++i)
      if (!removed[i]) *kept.Add() = std::move(*g_->mutable_node(i));
    g_->mutable_node()->Swap(&kept);
    return counts;
  }

 private:
  // The node that alone reads `name` (once), else -1.
  int SoleReader(const std::string& name) const {
    auto r = readers_.find(name);
    return r == readers_.end() || r->second.count != 1 ? -1 : r->second.node;
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
  std::unordered_map<std::string, const onnx::TensorProto*> inits_;
  struct Readers {
    int count = 0;
    int node = -1;  // the first node reading the name
  };
  std::unordered_map<std::string, Readers> readers_;
};

}  // namespace

FusionCounts FuseNodes(onnx::ModelProto* model) {
  FusionCounts counts = Fuser(model->mutable_graph()).Run();
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
