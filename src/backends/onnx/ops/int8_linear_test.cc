// Int8 products (int8_linear.h, int8_ops.cc) against FP32's: per call, split
// between threads, and as the kernels of a whole graph loaded with an int8
// registry (MatMul + Add fused into Linear, Gemm with transB).
#include "backends/aten/int8_linear.h"

#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backends/aten/int8_conv.h"
#include "backends/onnx/model_loader.h"

namespace inferd::onnxexec::ops {
namespace {

using aten::Int8Conv2d;
using aten::Int8Epilogue;
using aten::Int8Linear;

at::Tensor Randn8(std::vector<int64_t> shape, uint64_t seed, double scale = 1.0) {
  at::Generator g = at::detail::createCPUGenerator(seed);
  return at::randn(shape, g, at::TensorOptions().dtype(at::kFloat)) * scale;
}

double RelErr8(const at::Tensor& got, const at::Tensor& want) {
  return (got - want).norm().item<double>() / want.norm().item<double>();
}

TEST(Int8LinearTest, CloseToTheFp32ProductForEveryRowCountAndBothLayouts) {
  const at::Tensor w = Randn8({96, 40}, 1, 0.05), bias = Randn8({40}, 2, 0.1);
  auto plain = Int8Linear::Make(w, /*transposed=*/false, bias, Int8Epilogue::kNone);
  auto transposed = Int8Linear::Make(w.t().contiguous(), /*transposed=*/true, bias, Int8Epilogue::kNone);
  ASSERT_TRUE(plain && transposed);
  EXPECT_EQ((*plain)->k(), 96);
  EXPECT_EQ((*plain)->n(), 40);
  EXPECT_LT((*plain)->bytes(), (*plain)->float_bytes() * 35 / 100);  // int8 values (n padded to 48) + scales + sums
  for (int64_t m : {1, 3, 8, 17, 64, 200}) {
    const at::Tensor x = Randn8({m, 96}, 10 + static_cast<uint64_t>(m));
    const at::Tensor want = at::matmul(x, w) + bias;
    for (const auto& l : {*plain, *transposed}) {
      auto y = l->Run(x);
      ASSERT_TRUE(y.ok()) << y.status().ToString();
      ASSERT_EQ(y->sizes(), want.sizes());
      EXPECT_LT(RelErr8(*y, want), 0.03) << "M " << m;
    }
  }
  auto bad = (*plain)->Run(Randn8({2, 95}, 3));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("takes a float [M, 96] input"), std::string::npos);
}

// Rows or outputs split between threads: the integer products are exact, so the split changes no bit.
TEST(Int8LinearTest, NonFiniteWeightsStayFp32) {
  at::Tensor w = Randn8({16, 8}, 40);
  w[3][2] = NAN;
  EXPECT_FALSE(Int8Linear::Make(w, false, at::Tensor(), Int8Epilogue::kNone));
  at::Tensor c = Randn8({4, 3, 3, 3}, 41);
  c[1][0][0][0] = INFINITY;
  EXPECT_FALSE(Int8Conv2d::Make(c, at::Tensor(), ConvGeometry()));
}

TEST(Int8LinearTest, ThreadsSplitRowsOrOutputsWithoutChangingTheAnswer) {
  const at::Tensor w = Randn8({256, 300}, 4, 0.05);
  auto l = Int8Linear::Make(w, false, at::Tensor(), Int8Epilogue::kGeluErf);
  ASSERT_TRUE(l);
  const int before = at::get_num_threads();
  for (int64_t m : {1, 5, 40}) {  // outputs split (few rows), then rows
    const at::Tensor x = Randn8({m, 256}, 20 + static_cast<uint64_t>(m));
    at::set_num_threads(1);
    const at::Tensor one = (*l)->Run(x).value();
    at::set_num_threads(2);
    const at::Tensor two = (*l)->Run(x).value();
    EXPECT_TRUE(at::equal(one, two)) << "M " << m;
    EXPECT_LT(RelErr8(one, at::gelu(at::matmul(x, w))), 0.03);
  }
  at::set_num_threads(before);
}

onnx::TensorProto Init8(const std::string& name, const at::Tensor& t) {
  onnx::TensorProto p;
  p.set_name(name);
  p.set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : t.sizes()) p.add_dims(d);
  const at::Tensor c = t.contiguous();
  for (int64_t i = 0; i < c.numel(); ++i) p.add_float_data(c.data_ptr<float>()[i]);
  return p;
}

onnx::NodeProto* Node8(onnx::GraphProto* g, const std::string& op, std::vector<std::string> in,
                       const std::string& out) {
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(out);
  for (auto& s : in) n->add_input(s);
  n->add_output(out);
  return n;
}

// The graph's float input x [batch, in] and output y [batch, out].
void Io8(onnx::GraphProto* g, int64_t in, int64_t out) {
  for (auto [v, name, width] : {std::tuple{g->add_input(), "x", in}, std::tuple{g->add_output(), "y", out}}) {
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    t->mutable_shape()->add_dim()->set_dim_param("batch");
    t->mutable_shape()->add_dim()->set_dim_value(width);
  }
}

// x [N, 64] -> MatMul(w1) + b1 -> Relu -> Gemm(w2^T, b2, transB) -> y [N, 10]
std::string Mlp(const at::Tensor& w1, const at::Tensor& b1, const at::Tensor& w2, const at::Tensor& b2) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name("mlp");
  *g->add_initializer() = Init8("w1", w1);
  *g->add_initializer() = Init8("b1", b1);
  *g->add_initializer() = Init8("w2", w2.t().contiguous());
  *g->add_initializer() = Init8("b2", b2);
  auto node = [g](const std::string& op, std::vector<std::string> in, const std::string& out) {
    return Node8(g, op, std::move(in), out);
  };
  node("MatMul", {"x", "w1"}, "mm");
  node("Add", {"mm", "b1"}, "h");
  node("Relu", {"h"}, "r");
  auto* gemm = node("Gemm", {"r", "w2", "b2"}, "y");
  auto* attr = gemm->add_attribute();
  attr->set_name("transB");
  attr->set_type(onnx::AttributeProto::INT);
  attr->set_i(1);
  Io8(g, 64, 10);
  std::string bytes;
  m.SerializeToString(&bytes);
  return bytes;
}

TEST(Int8OpsTest, AGraphLoadedForInt8CountsItsWeightsAndStaysCloseToFp32) {
  const at::Tensor w1 = Randn8({64, 128}, 5, 0.1), b1 = Randn8({128}, 6, 0.1), w2 = Randn8({128, 10}, 7, 0.1),
                   b2 = Randn8({10}, 8, 0.1);
  const std::string bytes = Mlp(w1, b1, w2, b2);
  auto fp32_ops = MakeOpRegistry(true, true, /*int8=*/false);
  auto int8_ops = MakeOpRegistry(true, true, /*int8=*/true);
  auto fp32 = LoadOnnxModel(bytes, "/nonexistent", *fp32_ops);
  auto int8 = LoadOnnxModel(bytes, "/nonexistent", *int8_ops);
  ASSERT_TRUE(fp32.ok() && int8.ok()) << fp32.status().ToString() << int8.status().ToString();
  EXPECT_EQ(fp32->quantized.layers, 0);
  EXPECT_EQ(int8->quantized.layers, 2);  // the fused Linear and the Gemm
  EXPECT_EQ(int8->quantized.float_bytes, 4 * (64 * 128 + 128 * 10));
  EXPECT_LT(int8->quantized.int8_bytes, int8->quantized.float_bytes * 4 / 10);
  const at::Tensor x = Randn8({33, 64}, 9);
  const at::Tensor want = at::matmul(at::relu(at::matmul(x, w1) + b1), w2) + b2;
  std::vector<Value> a, b;
  ASSERT_TRUE(int8->plan->Run({Value::Of(x)}, &a).ok());
  ASSERT_TRUE(fp32->plan->Run({Value::Of(x)}, &b).ok());
  EXPECT_TRUE(at::allclose(b[0].tensor(), want, 1e-4, 1e-4));
  const double err = RelErr8(a[0].tensor(), want);
  EXPECT_LT(err, 0.03);
  EXPECT_GT(err, 0.0);  // int8 really ran
  EXPECT_TRUE(at::equal(a[0].tensor().argmax(1), want.argmax(1)) ||
              (a[0].tensor().argmax(1) != want.argmax(1)).sum().item<int64_t>() <= 1);
}

onnx::TensorProto Typed8(const std::string& name, int32_t type, std::vector<int64_t> dims, const at::Tensor& values) {
  onnx::TensorProto p;
  p.set_name(name);
  p.set_data_type(type);
  for (int64_t d : dims) p.add_dims(d);
  const at::Tensor c = values.contiguous();
  if (type == onnx::TensorProto::FLOAT) {
    for (int64_t i = 0; i < c.numel(); ++i) p.add_float_data(c.data_ptr<float>()[i]);
  } else {
    for (int64_t i = 0; i < c.numel(); ++i)
      p.add_int32_data(static_cast<int32_t>(c.to(at::kInt).data_ptr<int32_t>()[i]));
  }
  return p;
}

// A QDQ graph as ONNX Runtime's quantize_static writes it: x -> Q -> DQ -> MatMul(DQ(w int8, per column scale)).
// The weight's DequantizeLinear folds at load; the int8 registry then runs the MatMul on its kernels.
TEST(Int8OpsTest, AQdqGraphLoadsAndItsFoldedWeightsRunInInt8) {
  const at::Tensor wq = at::randint(-127, 128, {32, 8}, at::TensorOptions().dtype(at::kChar));
  const at::Tensor ws = at::rand({8}) * 0.01 + 0.005;
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  auto* g = m.mutable_graph();
  g->set_name("qdq");
  *g->add_initializer() = Typed8("x_scale", onnx::TensorProto::FLOAT, {}, at::full({1}, 0.02));
  *g->add_initializer() = Typed8("x_zp", onnx::TensorProto::UINT8, {}, at::full({1}, 128));
  *g->add_initializer() = Typed8("w_q", onnx::TensorProto::INT8, {32, 8}, wq);
  *g->add_initializer() = Typed8("w_scale", onnx::TensorProto::FLOAT, {8}, ws);
  *g->add_initializer() = Typed8("w_zp", onnx::TensorProto::INT8, {8}, at::zeros({8}));
  auto node = [g](const std::string& op, std::vector<std::string> in, const std::string& out) {
    return Node8(g, op, std::move(in), out);
  };
  node("QuantizeLinear", {"x", "x_scale", "x_zp"}, "xq");
  node("DequantizeLinear", {"xq", "x_scale", "x_zp"}, "xd");
  auto* dq = node("DequantizeLinear", {"w_q", "w_scale", "w_zp"}, "w");
  auto* axis = dq->add_attribute();
  axis->set_name("axis");
  axis->set_type(onnx::AttributeProto::INT);
  axis->set_i(1);
  node("MatMul", {"xd", "w"}, "y");
  Io8(g, 32, 8);
  std::string bytes;
  m.SerializeToString(&bytes);
  const at::Tensor x = Randn8({5, 32}, 40);
  // The reference: the specification's arithmetic in ATen.
  const at::Tensor xd = (at::clamp(at::round(x / 0.02f) + 128, 0, 255) - 128) * 0.02f;
  const at::Tensor want = at::matmul(xd, wq.to(at::kFloat) * ws);
  for (bool int8 : {false, true}) {
    auto ops = MakeOpRegistry(true, true, int8);
    auto model = LoadOnnxModel(bytes, "/nonexistent", *ops);
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    EXPECT_EQ(model->quantized.layers, int8 ? 1 : 0);
    EXPECT_GE(model->plan->num_folded(), 1u);  // the weight's DequantizeLinear
    std::vector<Value> out;
    ASSERT_TRUE(model->plan->Run({Value::Of(x)}, &out).ok());
    EXPECT_LT(RelErr8(out[0].tensor(), want), int8 ? 0.03 : 1e-5) << "int8 " << int8;
  }
}

// oneDNN's int8 convolution against ATen's FP32 one: unsigned inputs (a ReLU's) and signed ones, padding, strides,
// groups, bias and the fused ReLU; an all-zero input gives the bias.
TEST(Int8ConvTest, CloseToTheFp32Convolution) {
  struct Case {
    int64_t c, o, k, stride, pad, groups;
    bool relu;
  };
  for (const Case& t : {Case{8, 16, 3, 1, 1, 1, false}, Case{16, 32, 3, 2, 1, 1, true}, Case{3, 8, 7, 2, 3, 1, true},
                        Case{16, 16, 3, 1, 1, 4, false}, Case{32, 64, 1, 2, 0, 1, false}}) {
    const at::Tensor w = Randn8({t.o, t.c / t.groups, t.k, t.k}, 30, 0.1), b = Randn8({t.o}, 31, 0.1);
    ConvGeometry g;
    g.strides = {t.stride, t.stride};
    g.padding = {t.pad, t.pad};
    g.groups = t.groups;
    g.relu = t.relu;
    auto q = Int8Conv2d::Make(w, b, g);
    ASSERT_TRUE(q);
    EXPECT_LT((*q)->bytes(), (*q)->float_bytes() * 3 / 10 + 4 * t.o);
    for (bool positive : {true, false}) {
      at::Tensor x = Randn8({2, t.c, 15, 15}, 32);
      if (positive) x = x.relu();
      at::Tensor want = at::conv2d(x, w, b, {t.stride, t.stride}, {t.pad, t.pad}, {1, 1}, t.groups);
      if (t.relu) want = want.relu();
      auto y = (*q)->Run(x);
      ASSERT_TRUE(y.ok()) << y.status().ToString();
      ASSERT_EQ(y->sizes(), want.sizes());
      EXPECT_LT(RelErr8(*y, want), 0.03) << "c " << t.c << " o " << t.o << " k " << t.k << " positive " << positive
                                         << " impl " << (*q)->ImplFor(x.sizes().vec(), !positive);
      EXPECT_TRUE(y->is_contiguous(at::MemoryFormat::ChannelsLast));  // kept for the next layer
      EXPECT_EQ((*q)->ImplFor(x.sizes().vec(), !positive).find("none"), std::string::npos) << "no int8 kernel";
      // The same input channels last (a previous int8 layer's output) gives the same answer.
      auto again = (*q)->Run(x.contiguous(at::MemoryFormat::ChannelsLast));
      ASSERT_TRUE(again.ok());
      EXPECT_TRUE(at::equal(*again, *y));
    }
    auto zero = (*q)->Run(at::zeros({1, t.c, 15, 15}));
    ASSERT_TRUE(zero.ok());
    at::Tensor want =
        at::conv2d(at::zeros({1, t.c, 15, 15}), w, b, {t.stride, t.stride}, {t.pad, t.pad}, {1, 1}, t.groups);
    EXPECT_TRUE(at::allclose(*zero, t.relu ? want.relu() : want));
  }
  auto q = Int8Conv2d::Make(Randn8({4, 3, 3, 3}, 33), at::Tensor(), ConvGeometry());
  ASSERT_TRUE(q);
  auto bad = (*q)->Run(Randn8({1, 4, 8, 8}, 34));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("Conv takes a float [N, 3, H, W] input"), std::string::npos);
  at::Tensor inf = Randn8({1, 3, 8, 8}, 35);
  inf[0][0][0][0] = INFINITY;
  EXPECT_FALSE((*q)->Run(inf).ok());
}

}  // namespace
}  // namespace inferd::onnxexec::ops
