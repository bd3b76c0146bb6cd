// Load-time fusion (fusion.h) and the oneDNN kernels it leads to
// (ops/mkldnn.cc): which node pairs fuse, and that fused plans compute what
// the unfused graph computes.
#include "backends/onnx/fusion.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backends/onnx/model_loader.h"

namespace inferd::onnxexec {
namespace {

onnx::TensorProto FloatInit(const std::string& name, std::vector<int64_t> dims, float scale) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(onnx::TensorProto::FLOAT);
  int64_t n = 1;
  for (int64_t d : dims) {
    t.add_dims(d);
    n *= d;
  }
  for (int64_t i = 0; i < n; ++i) t.add_float_data(scale * static_cast<float>((i * 7) % 11 - 5));
  return t;
}

void Node(onnx::GraphProto* g, const std::string& op, std::vector<std::string> in, std::vector<std::string> out) {
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(op + "_" + out[0]);
  for (auto& s : in) n->add_input(s);
  for (auto& s : out) n->add_output(s);
}

void Io(onnx::ValueInfoProto* v, const std::string& name, std::vector<int64_t> dims) {
  v->set_name(name);
  auto* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) {
    auto* dim = t->mutable_shape()->add_dim();
    if (d < 0) {
      dim->set_dim_param("batch");
    } else {
      dim->set_dim_value(d);
    }
  }
}

onnx::ModelProto Model() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  auto* o = m.add_opset_import();
  o->set_domain("");
  o->set_version(17);
  return m;
}

// x [N, 3, 6, 6] -> Conv -> Relu -> Conv -> Add(residual: the first Relu) ->
// Relu -> GlobalAveragePool -> Flatten -> MatMul -> Add(bias) -> y [N, 5].
onnx::ModelProto ResidualNet(bool conv_output_also_a_graph_output) {
  onnx::ModelProto m = Model();
  auto* g = m.mutable_graph();
  g->set_name("residual");
  Io(g->add_input(), "x", {-1, 3, 6, 6});
  *g->add_initializer() = FloatInit("w1", {4, 3, 3, 3}, 0.05f);
  *g->add_initializer() = FloatInit("b1", {4}, 0.1f);
  *g->add_initializer() = FloatInit("w2", {4, 4, 3, 3}, 0.04f);
  *g->add_initializer() = FloatInit("fc", {4, 5}, 0.2f);
  *g->add_initializer() = FloatInit("fc_bias", {5}, 0.3f);
  Node(g, "Conv", {"x", "w1", "b1"}, {"c1"});
  Node(g, "Relu", {"c1"}, {"r1"});
  Node(g, "Conv", {"r1", "w2"}, {"c2"});
  Node(g, "Add", {"c2", "r1"}, {"s"});
  Node(g, "Relu", {"s"}, {"r2"});
  Node(g, "GlobalAveragePool", {"r2"}, {"p"});
  Node(g, "Flatten", {"p"}, {"f"});
  Node(g, "MatMul", {"f", "fc"}, {"mm"});
  Node(g, "Add", {"mm", "fc_bias"}, {"y"});
  for (auto* n : {g->mutable_node(0), g->mutable_node(2)}) {
    auto* a = n->add_attribute();
    a->set_name("pads");
    a->set_type(onnx::AttributeProto::INTS);
    for (int i = 0; i < 4; ++i) a->add_ints(1);
  }
  Io(g->add_output(), "y", {-1, 5});
  if (conv_output_also_a_graph_output) Io(g->add_output(), "c1", {-1, 4, 6, 6});
  return m;
}

std::vector<std::string> Ops(const onnx::ModelProto& m) {
  std::vector<std::string> ops;
  for (const auto& n : m.graph().node()) ops.push_back((n.domain().empty() ? "" : n.domain() + ".") + n.op_type());
  return ops;
}

TEST(FusionTest, FusesConvReluAndMatMulAddOnlyWhereTheFirstOutputHasNoOtherReader) {
  onnx::ModelProto m = ResidualNet(false);
  FusionCounts c = FuseNodes(&m);
  EXPECT_EQ(c.conv_relu, 1);  // the second Conv feeds the Add, not a Relu
  EXPECT_EQ(c.matmul_add, 1);
  EXPECT_EQ(Ops(m), (std::vector<std::string>{"ai.inferd.Conv", "Conv", "Add", "Relu", "GlobalAveragePool", "Flatten",
                                              "ai.inferd.Linear"}));
  EXPECT_EQ(m.graph().node(0).output(0), "r1");
  EXPECT_EQ(m.graph().node(6).input(2), "fc_bias");
  bool imports = false;
  for (const auto& o : m.opset_import()) imports = imports || (o.domain() == kInferdDomain && o.version() == 1);
  EXPECT_TRUE(imports);

  onnx::ModelProto kept = ResidualNet(true);  // c1 is also a graph output: the Conv must produce it
  EXPECT_EQ(FuseNodes(&kept).conv_relu, 0);
}

TEST(FusionTest, WeightsSharedThroughIdentityCountAsConstants) {
  onnx::ModelProto m = Model();
  auto* g = m.mutable_graph();
  g->set_name("shared");
  Io(g->add_input(), "x", {-1, 4});
  *g->add_initializer() = FloatInit("w", {4, 3}, 0.1f);
  *g->add_initializer() = FloatInit("b", {3}, 0.1f);
  Node(g, "Identity", {"w"}, {"w_shared"});
  Node(g, "MatMul", {"x", "w_shared"}, {"mm"});
  Node(g, "Add", {"b", "mm"}, {"y"});  // bias first: either order fuses
  Io(g->add_output(), "y", {-1, 3});
  EXPECT_EQ(FuseNodes(&m).matmul_add, 1);
  EXPECT_EQ(Ops(m), (std::vector<std::string>{"Identity", "ai.inferd.Linear"}));
}

TEST(FusionTest, FusedPlanMatchesTheUnfusedComputation) {
  auto registry = MakeOpRegistry();
  std::string bytes;
  ASSERT_TRUE(ResidualNet(false).SerializeToString(&bytes));
  auto model = LoadOnnxModel(bytes, "/nonexistent", *registry);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_EQ(model->fused, 2);
  at::Tensor x = at::arange(2 * 3 * 6 * 6, at::kFloat).reshape({2, 3, 6, 6}).div(50).sub(1);
  std::vector<Value> out;
  ASSERT_TRUE(model->plan->Run({Value::Of(x)}, &out).ok());
  ASSERT_EQ(out.size(), 1u);
  ASSERT_FALSE(out[0].tensor().is_mkldnn());  // graph outputs come back dense
  // The same network with ATen's reference ops.
  const onnx::ModelProto reference = ResidualNet(false);
  auto init = [&](const std::string& name) {
    for (const auto& t : reference.graph().initializer()) {
      if (t.name() != name) continue;
      std::vector<float> v(t.float_data().begin(), t.float_data().end());
      return at::tensor(v).reshape(std::vector<int64_t>(t.dims().begin(), t.dims().end()));
    }
    return at::Tensor();
  };
  at::Tensor r1 = at::relu(at::conv2d(x, init("w1"), init("b1"), 1, 1));
  at::Tensor r2 = at::relu(at::conv2d(r1, init("w2"), {}, 1, 1) + r1);
  at::Tensor want = at::matmul(r2.mean({2, 3}), init("fc")) + init("fc_bias");
  EXPECT_TRUE(at::allclose(out[0].tensor(), want, 1e-5, 1e-5)) << out[0].tensor() << want;

  // OPTIMIZE_FOR_INFERENCE false: plain kernels, nothing fused, the same answer.
  auto plain_registry = MakeOpRegistry(/*optimized=*/false);
  auto plain = LoadOnnxModel(bytes, "/nonexistent", *plain_registry, /*fuse=*/false);
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ(plain->fused, 0);
  EXPECT_GT(plain->plan->num_steps(), model->plan->num_steps());
  std::vector<Value> plain_out;
  ASSERT_TRUE(plain->plan->Run({Value::Of(x)}, &plain_out).ok());
  EXPECT_TRUE(at::allclose(plain_out[0].tensor(), want, 1e-5, 1e-5));
}

onnx::TensorProto Scalar(const std::string& name, float v) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(onnx::TensorProto::FLOAT);
  t.add_float_data(v);
  return t;
}

// A scalar as a Constant node (how torch.onnx writes them) rather than an initializer.
void ConstantNode(onnx::GraphProto* g, const std::string& name, float v) {
  Node(g, "Constant", {}, {name});
  auto* a = g->mutable_node(g->node_size() - 1)->add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  *a->mutable_t() = Scalar(name, v);
}

// x [N, 6] -> MatMul -> Add(bias) -> GELU (torch.nn.GELU's Div Erf Add Mul Mul,
// or Hugging Face's Mul(x, 0.5) beside Div Erf Add, then Mul) -> y [N, 8].
// `sqrt2`: the divisor (another value must not fuse).
onnx::ModelProto LinearGelu(bool hugging_face_order, float sqrt2 = 1.4142135f) {
  onnx::ModelProto m = Model();
  auto* g = m.mutable_graph();
  g->set_name("gelu");
  Io(g->add_input(), "x", {-1, 6});
  *g->add_initializer() = FloatInit("w", {6, 8}, 0.1f);
  *g->add_initializer() = FloatInit("b", {8}, 0.2f);
  *g->add_initializer() = Scalar("one", 1.0f);
  *g->add_initializer() = Scalar("half", 0.5f);
  ConstantNode(g, "sqrt2", sqrt2);
  Node(g, "MatMul", {"x", "w"}, {"mm"});
  Node(g, "Add", {"mm", "b"}, {"h"});
  if (hugging_face_order) Node(g, "Mul", {"h", "half"}, {"h_half"});
  Node(g, "Div", {"h", "sqrt2"}, {"d"});
  Node(g, "Erf", {"d"}, {"e"});
  Node(g, "Add", {"one", "e"}, {"e1"});
  if (hugging_face_order) {
    Node(g, "Mul", {"h_half", "e1"}, {"y"});
  } else {
    Node(g, "Mul", {"h", "e1"}, {"p"});
    Node(g, "Mul", {"p", "half"}, {"y"});
  }
  Io(g->add_output(), "y", {-1, 8});
  return m;
}

// LayerNorm over the last axis as torch.onnx writes it below opset 17.
onnx::ModelProto DecomposedLayerNorm() {
  onnx::ModelProto m = Model();
  m.mutable_opset_import(0)->set_version(13);
  auto* g = m.mutable_graph();
  g->set_name("layer_norm");
  Io(g->add_input(), "x", {-1, 3, 10});
  *g->add_initializer() = FloatInit("gamma", {10}, 0.3f);
  *g->add_initializer() = FloatInit("beta", {10}, 0.1f);
  *g->add_initializer() = Scalar("two", 2.0f);
  ConstantNode(g, "eps", 1e-5f);
  for (const char* mean : {"mean", "var"}) {
    Node(g, "ReduceMean", {std::string(mean) == "mean" ? "x" : "sq"}, {mean});
    auto* axes = g->mutable_node(g->node_size() - 1)->add_attribute();
    axes->set_name("axes");
    axes->set_type(onnx::AttributeProto::INTS);
    axes->add_ints(-1);
    if (std::string(mean) == "mean") {
      Node(g, "Sub", {"x", "mean"}, {"d"});
      Node(g, "Pow", {"d", "two"}, {"sq"});
    }
  }
  Node(g, "Add", {"var", "eps"}, {"ve"});
  Node(g, "Sqrt", {"ve"}, {"s"});
  Node(g, "Div", {"d", "s"}, {"n"});
  Node(g, "Mul", {"n", "gamma"}, {"g"});
  Node(g, "Add", {"g", "beta"}, {"y"});
  Io(g->add_output(), "y", {-1, 3, 10});
  return m;
}

// The fused plan's output and the unfused plain kernels' output for x.
std::pair<at::Tensor, at::Tensor> FusedAndPlain(const onnx::ModelProto& m, const at::Tensor& x, int* fused) {
  std::string bytes;
  EXPECT_TRUE(m.SerializeToString(&bytes));
  auto registry = MakeOpRegistry();
  auto model = LoadOnnxModel(bytes, "/nonexistent", *registry);
  auto plain_registry = MakeOpRegistry(/*optimized=*/false);
  auto plain = LoadOnnxModel(bytes, "/nonexistent", *plain_registry, /*fuse=*/false);
  if (!model.ok() || !plain.ok()) {
    ADD_FAILURE() << model.status().ToString() << " / " << plain.status().ToString();
    return {};
  }
  *fused = model->fused;
  std::vector<Value> a, b;
  EXPECT_TRUE(model->plan->Run({Value::Of(x)}, &a).ok());
  EXPECT_TRUE(plain->plan->Run({Value::Of(x)}, &b).ok());
  if (a.size() != 1 || b.size() != 1) return {};
  return {a[0].tensor(), b[0].tensor()};
}

TEST(FusionTest, GeluInBothExportOrdersFusesIntoTheLinearBeforeIt) {
  for (bool hf : {false, true}) {
    onnx::ModelProto m = LinearGelu(hf);
    FusionCounts c = FuseNodes(&m);
    EXPECT_EQ(c.gelu, 1);
    EXPECT_EQ(c.matmul_add, 1);
    EXPECT_EQ(c.linear_activation, 1);
    EXPECT_EQ(Ops(m), (std::vector<std::string>{"Constant", "ai.inferd.Linear"})) << hf;
    EXPECT_EQ(m.graph().node(1).output(0), "y");

    int fused = 0;
    const at::Tensor x = at::linspace(-3, 3, 5 * 6, at::kFloat).reshape({5, 6});
    auto [got, want] = FusedAndPlain(LinearGelu(hf), x, &fused);
    EXPECT_EQ(fused, 3);
    EXPECT_TRUE(at::allclose(got, want, 1e-5, 1e-5)) << got << want;
  }
}

TEST(FusionTest, GeluAloneIsOneOpAndLookalikesAreLeftAsTheyAre) {
  onnx::ModelProto alone = LinearGelu(true);
  alone.mutable_graph()->mutable_initializer(1)->set_dims(0, 9);  // the bias no longer fits: MatMul and Add stay
  FusionCounts c = FuseNodes(&alone);
  EXPECT_EQ(c.gelu, 1);
  EXPECT_EQ(c.total(), 1);
  EXPECT_EQ(Ops(alone), (std::vector<std::string>{"Constant", "MatMul", "Add", "ai.inferd.Gelu"}));

  onnx::ModelProto other_scale = LinearGelu(false, 2.0f);  // x * 0.5 * (1 + erf(x / 2)) is no GELU
  EXPECT_EQ(FuseNodes(&other_scale).gelu, 0);

  onnx::ModelProto read_elsewhere = LinearGelu(false);  // erf's output also a graph output
  Io(read_elsewhere.mutable_graph()->add_output(), "e", {-1, 8});
  EXPECT_EQ(FuseNodes(&read_elsewhere).gelu, 0);
}

TEST(FusionTest, DecomposedLayerNormIsOneOpAndComputesTheSame) {
  onnx::ModelProto m = DecomposedLayerNorm();
  EXPECT_EQ(FuseNodes(&m).layer_norm, 1);
  EXPECT_EQ(Ops(m), (std::vector<std::string>{"Constant", "ai.inferd.LayerNormalization"}));

  int fused = 0;
  const at::Tensor x = at::linspace(-2, 5, 2 * 3 * 10, at::kFloat).reshape({2, 3, 10}).pow(2);
  auto [got, want] = FusedAndPlain(DecomposedLayerNorm(), x, &fused);
  EXPECT_EQ(fused, 1);
  EXPECT_TRUE(at::allclose(got, want, 1e-5, 1e-5)) << got << want;

  onnx::ModelProto kept = DecomposedLayerNorm();  // the centred values also read elsewhere
  Io(kept.mutable_graph()->add_output(), "d", {-1, 3, 10});
  EXPECT_EQ(FuseNodes(&kept).layer_norm, 0);
}

// A pooling window larger than the convolution's output: oneDNN would make an
// empty tensor, and its global pooling then divides by a zero stride
// (SIGFPE; found by fuzz_onnx_model). The standard kernel reports it.
TEST(FusionTest, APoolingWindowLargerThanItsOneDnnInputIsAnErrorNotACrash) {
  onnx::ModelProto m = Model();
  auto* g = m.mutable_graph();
  g->set_name("pool");
  Io(g->add_input(), "x", {1, 1, 1, 1});
  *g->add_initializer() = FloatInit("w", {1, 1, 1, 1}, 1.0f);
  Node(g, "Conv", {"x", "w"}, {"c"});
  Node(g, "MaxPool", {"c"}, {"m"});
  Node(g, "GlobalAveragePool", {"m"}, {"y"});
  auto* pool = g->mutable_node(1);
  for (const char* name : {"kernel_shape", "strides"}) {
    auto* a = pool->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    a->add_ints(std::string(name) == "strides" ? 2 : 3);
    a->add_ints(std::string(name) == "strides" ? 2 : 3);
  }
  Io(g->add_output(), "y", {1, 1, 1, 1});
  std::string bytes;
  ASSERT_TRUE(m.SerializeToString(&bytes));
  auto registry = MakeOpRegistry();
  auto model = LoadOnnxModel(bytes, "/nonexistent", *registry);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  std::vector<Value> out;
  const Status st = model->plan->Run({Value::Of(at::ones({1, 1, 1, 1}))}, &out);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("Output size is too small"), std::string::npos) << st.ToString();
}

TEST(FusionTest, ModelsMayNotUseInferdsOwnDomain) {
  onnx::ModelProto m = ResidualNet(false);
  auto* o = m.add_opset_import();
  o->set_domain(kInferdDomain);
  o->set_version(1);
  std::string bytes;
  ASSERT_TRUE(m.SerializeToString(&bytes));
  auto registry = MakeOpRegistry();
  auto model = LoadOnnxModel(bytes, "/nonexistent", *registry);
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.status().message().find("inferd's own"), std::string::npos) << model.status().ToString();
}

}  // namespace
}  // namespace inferd::onnxexec
