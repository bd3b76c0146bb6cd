// Element-wise ops: unary math and activations, binary arithmetic and
// comparisons (numpy broadcasting), variadic Sum/Mean/Max/Min, Where, Cast.
#include <charconv>
#include <cmath>
#include <cstdlib>

#include "backends/onnx/ops/op_util.h"
#include "backends/onnx/tensor_proto.h"

namespace inferd::onnxexec::ops {
namespace {

using UnaryFn = at::Tensor (*)(const at::Tensor&);

void Unary(OpRegistry& r, const char* name, UnaryFn fn) {
  r.Add("", name, [fn](const NodeInfo&) -> Result<Compiled> {
    return Make([fn](const std::vector<const Value*>& in, std::vector<Value>& out) -> Status {
      INFERD_ASSIGN_OR_RETURN(at::Tensor x, In(in, 0));
      out[0] = Value::Of(fn(x));
      return Status::OK();
    });
  });
}

// An activation with attributes: build(node) returns the function of x.
using ActFn = std::function<at::Tensor(const at::Tensor&)>;
void Activation(OpRegistry& r, const char* name, std::function<ActFn(const NodeInfo&)> build) {
  r.Add("", name, [build](const NodeInfo& n) -> Result<Compiled> {
    ActFn fn = build(n);
    return Make([fn](const std::vector<const Value*>& in, std::vector<Value>& out) -> Status {
      INFERD_ASSIGN_OR_RETURN(at::Tensor x, In(in, 0));
      out[0] = Value::Of(fn(x));
      return Status::OK();
    });
  });
}

using BinaryFn = std::function<at::Tensor(const at::Tensor&, const at::Tensor&)>;
void Binary(OpRegistry& r, const char* name, std::function<BinaryFn(const NodeInfo&)> build) {
  r.Add("", name, [build](const NodeInfo& n) -> Result<Compiled> {
    // Before opset 7: `broadcast` 1 lets B match A's dimensions from `axis`.
    const bool legacy_axis = n.opset() < 7 && n.Int("broadcast", 0) != 0 && n.Has("axis");
    const int64_t axis = n.Int("axis", 0);
    BinaryFn fn = build(n);
    return Make([fn, legacy_axis, axis](const std::vector<const Value*>& in, std::vector<Value>& out) -> Status {
      INFERD_ASSIGN_OR_RETURN(at::Tensor a, In(in, 0));
      INFERD_ASSIGN_OR_RETURN(at::Tensor b, In(in, 1));
      if (legacy_axis) {
        const int64_t start = axis < 0 ? axis + a.dim() : axis;
        if (start < 0 || start + b.dim() > a.dim()) return Status::InvalidArgument("broadcast axis out of range");
        std::vector<int64_t> shape(start, 1);
        for (int64_t d : b.sizes()) shape.push_back(d);
        shape.resize(a.dim(), 1);
        b = b.reshape(shape);
      }
      out[0] = Value::Of(fn(a, b));
      return Status::OK();
    });
  });
}

BinaryFn Fixed(BinaryFn f) { return f; }

// Sum, Mean, Max, Min over any number of broadcast inputs.
void Variadic(OpRegistry& r, const char* name, BinaryFn combine, bool mean) {
  r.Add("", name, [combine, mean](const NodeInfo&) -> Result<Compiled> {
    return Make([combine, mean](const std::vector<const Value*>& in, std::vector<Value>& out) -> Status {
      INFERD_ASSIGN_OR_RETURN(at::Tensor acc, In(in, 0));
      for (size_t i = 1; i < in.size(); ++i) {
        INFERD_ASSIGN_OR_RETURN(at::Tensor x, In(in, i));
        acc = combine(acc, x);
      }
      if (mean) acc = at::div(acc, static_cast<double>(in.size())).to(acc.scalar_type());
      if (in.size() == 1) acc = acc.clone();
      out[0] = Value::Of(acc);
      return Status::OK();
    });
  });
}

// Integer division truncates toward zero (as C and ONNX Runtime do).
at::Tensor Divide(const at::Tensor& a, const at::Tensor& b) {
  if (at::isIntegralType(a.scalar_type(), /*includeBool=*/false)) return at::div(a, b, "trunc");
  return at::div(a, b);
}

// Pow: the result has the base's type.
at::Tensor Power(const at::Tensor& a, const at::Tensor& b) {
  if (a.scalar_type() == b.scalar_type()) return at::pow(a, b);
  if (at::isIntegralType(a.scalar_type(), false))
    return at::pow(a.to(at::kDouble), b.to(at::kDouble)).to(a.scalar_type());
  return at::pow(a, b.to(a.scalar_type()));
}

std::string FloatToString(double v, bool is_float) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "INF" : "-INF";
  char buf[64];
  auto r =
      is_float ? std::to_chars(buf, buf + sizeof buf, static_cast<float>(v)) : std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

Result<Value> CastValue(const Value& v, int32_t to) {
  if (to == onnx::TensorProto::STRING) {
    if (v.is_strings()) return v;
    const at::Tensor t = v.tensor().contiguous();
    StringTensor s;
    s.shape = t.sizes().vec();
    const at::Tensor d = t.to(at::kDouble);
    const double* p = d.data_ptr<double>();
    const bool is_float = t.scalar_type() == at::kFloat || t.scalar_type() == at::kHalf;
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (t.scalar_type() == at::kBool) {
        s.data.push_back(p[i] != 0 ? "1" : "0");
      } else if (at::isIntegralType(t.scalar_type(), false)) {
        s.data.push_back(std::to_string(static_cast<int64_t>(p[i])));
      } else {
        s.data.push_back(FloatToString(p[i], is_float));
      }
    }
    return Value::Of(std::move(s));
  }
  auto st = ScalarTypeOf(to);
  if (!st) return Status::InvalidArgument("cannot cast to " + OnnxTypeName(to));
  if (v.is_strings()) {
    const StringTensor& s = v.strings();
    at::Tensor d = at::empty(s.shape, at::TensorOptions().dtype(at::kDouble));
    double* p = d.data_ptr<double>();
    for (size_t i = 0; i < s.data.size(); ++i) {
      const std::string& x = s.data[i];
      if (x == "NaN" || x == "nan") {
        p[i] = NAN;
      } else if (x == "INF" || x == "inf" || x == "+INF" || x == "+inf" || x == "Infinity") {
        p[i] = INFINITY;
      } else if (x == "-INF" || x == "-inf" || x == "-Infinity") {
        p[i] = -INFINITY;
      } else {
        char* end = nullptr;
        p[i] = std::strtod(x.c_str(), &end);
        if (x.empty() || end != x.c_str() + x.size())
          return Status::InvalidArgument("cannot cast '" + x + "' to a number");
      }
    }
    return Value::Of(d.to(*st));
  }
  return Value::Of(v.tensor().to(*st));
}

}  // namespace

void RegisterElementwiseOps(OpRegistry& r) {
  Unary(r, "Abs", [](const at::Tensor& x) { return at::abs(x); });
  Unary(r, "Neg", [](const at::Tensor& x) { return at::neg(x); });
  Unary(r, "Exp", [](const at::Tensor& x) { return at::exp(x); });
  Unary(r, "Log", [](const at::Tensor& x) { return at::log(x); });
  Unary(r, "Sqrt", [](const at::Tensor& x) { return at::sqrt(x); });
  Unary(r, "Reciprocal", [](const at::Tensor& x) { return at::reciprocal(x); });
  Unary(r, "Floor", [](const at::Tensor& x) { return at::floor(x); });
  Unary(r, "Ceil", [](const at::Tensor& x) { return at::ceil(x); });
  Unary(r, "Round", [](const at::Tensor& x) { return at::round(x); });  // half to even
  Unary(r, "Sin", [](const at::Tensor& x) { return at::sin(x); });
  Unary(r, "Cos", [](const at::Tensor& x) { return at::cos(x); });
  Unary(r, "Tan", [](const at::Tensor& x) { return at::tan(x); });
  Unary(r, "Asin", [](const at::Tensor& x) { return at::asin(x); });
  Unary(r, "Acos", [](const at::Tensor& x) { return at::acos(x); });
  Unary(r, "Atan", [](const at::Tensor& x) { return at::atan(x); });
  Unary(r, "Sinh", [](const at::Tensor& x) { return at::sinh(x); });
  Unary(r, "Cosh", [](const at::Tensor& x) { return at::cosh(x); });
  Unary(r, "Asinh", [](const at::Tensor& x) { return at::asinh(x); });
  Unary(r, "Acosh", [](const at::Tensor& x) { return at::acosh(x); });
  Unary(r, "Atanh", [](const at::Tensor& x) { return at::atanh(x); });
  Unary(r, "Erf", [](const at::Tensor& x) { return at::erf(x); });
  Unary(r, "Sign", [](const at::Tensor& x) { return at::sign(x); });
  Unary(r, "Sigmoid", [](const at::Tensor& x) { return at::sigmoid(x); });
  Unary(r, "Tanh", [](const at::Tensor& x) { return at::tanh(x); });
  Unary(r, "Relu", [](const at::Tensor& x) { return at::relu(x); });
  Unary(r, "Softplus", [](const at::Tensor& x) { return at::log1p(at::exp(x)); });
  Unary(r, "Softsign", [](const at::Tensor& x) { return x / (at::abs(x) + 1); });
  Unary(r, "IsNaN", [](const at::Tensor& x) { return at::isnan(x); });
  Unary(r, "Not", [](const at::Tensor& x) { return at::logical_not(x); });

  Activation(r, "LeakyRelu", [](const NodeInfo& n) -> ActFn {
    const double a = n.Float("alpha", 0.01f);
    return [a](const at::Tensor& x) { return at::where(x >= 0, x, x * a); };
  });
  Activation(r, "Elu", [](const NodeInfo& n) -> ActFn {
    const double a = n.Float("alpha", 1.0f);
    return [a](const at::Tensor& x) { return at::where(x >= 0, x, (at::exp(x) - 1) * a); };
  });
  Activation(r, "Celu", [](const NodeInfo& n) -> ActFn {
    const double a = n.Float("alpha", 1.0f);
    return [a](const at::Tensor& x) { return at::celu(x, a); };
  });
  Activation(r, "Selu", [](const NodeInfo& n) -> ActFn {
    const double a = n.Float("alpha", 1.67326319217681884765625f);
    const double g = n.Float("gamma", 1.05070102214813232421875f);
    return [a, g](const at::Tensor& x) { return at::where(x > 0, x * g, (at::exp(x) * a - a) * g); };
  });
  Activation(r, "HardSigmoid", [](const NodeInfo& n) -> ActFn {
    const double a = n.Float("alpha", 0.2f), b = n.Float("beta", 0.5f);
    return [a, b](const at::Tensor& x) { return at::clamp(x * a + b, 0, 1); };
  });
  Activation(r, "HardSwish", [](const NodeInfo&) -> ActFn {
    return [](const at::Tensor& x) { return x * at::clamp(x / 6 + 0.5, 0, 1); };
  });
  Activation(r, "ThresholdedRelu", [](const NodeInfo& n) -> ActFn {
    const double a = n.Float("alpha", 1.0f);
    return [a](const at::Tensor& x) { return at::where(x > a, x, at::zeros_like(x)); };
  });
  Activation(r, "Shrink", [](const NodeInfo& n) -> ActFn {
    const double bias = n.Float("bias", 0.0f), lambd = n.Float("lambd", 0.5f);
    return [bias, lambd](const at::Tensor& x) {
      return at::where(x < -lambd, x + bias, at::where(x > lambd, x - bias, at::zeros_like(x))).to(x.scalar_type());
    };
  });
  Activation(r, "IsInf", [](const NodeInfo& n) -> ActFn {
    const bool neg = n.Int("detect_negative", 1) != 0, pos = n.Int("detect_positive", 1) != 0;
    return [neg, pos](const at::Tensor& x) {
      if (neg && pos) return at::isinf(x);
      if (pos) return at::isposinf(x);
      if (neg) return at::isneginf(x);
      return at::zeros_like(x, at::kBool);
    };
  });

  Binary(r, "Add",
         [](const NodeInfo&) { return Fixed([](const at::Tensor& a, const at::Tensor& b) { return at::add(a, b); }); });
  Binary(r, "Sub",
         [](const NodeInfo&) { return Fixed([](const at::Tensor& a, const at::Tensor& b) { return at::sub(a, b); }); });
  Binary(r, "Mul",
         [](const NodeInfo&) { return Fixed([](const at::Tensor& a, const at::Tensor& b) { return at::mul(a, b); }); });
  Binary(r, "Div", [](const NodeInfo&) { return Fixed(Divide); });
  Binary(r, "Pow", [](const NodeInfo&) { return Fixed(Power); });
  Binary(r, "PRelu", [](const NodeInfo& n) {
    // Before opset 7 a 1-D slope runs along the channel axis (1).
    const bool channel_slope = n.opset() < 7;
    return Fixed([channel_slope](const at::Tensor& x, const at::Tensor& slope) {
      at::Tensor s = slope;
      if (channel_slope && slope.dim() == 1 && x.dim() > 2 && slope.size(0) == x.size(1)) {
        std::vector<int64_t> shape(x.dim() - 1, 1);
        shape[0] = slope.size(0);
        s = slope.reshape(shape);
      }
      return at::where(x >= 0, x, x * s);
    });
  });
  Binary(r, "Mod", [](const NodeInfo& n) {
    const bool fmod = n.Int("fmod", 0) != 0;
    return Fixed(
        [fmod](const at::Tensor& a, const at::Tensor& b) { return fmod ? at::fmod(a, b) : at::remainder(a, b); });
  });
  Binary(r, "BitShift", [](const NodeInfo& n) {
    const bool left = n.String("direction", "") == "LEFT";
    return Fixed([left](const at::Tensor& a, const at::Tensor& b) {
      return left ? at::bitwise_left_shift(a, b) : at::bitwise_right_shift(a, b);
    });
  });
  Binary(r, "And", [](const NodeInfo&) {
    return Fixed([](const at::Tensor& a, const at::Tensor& b) { return at::logical_and(a, b); });
  });
  Binary(r, "Or", [](const NodeInfo&) {
    return Fixed([](const at::Tensor& a, const at::Tensor& b) { return at::logical_or(a, b); });
  });
  Binary(r, "Xor", [](const NodeInfo&) {
    return Fixed([](const at::Tensor& a, const at::Tensor& b) { return at::logical_xor(a, b); });
  });
  Binary(r, "Equal",
         [](const NodeInfo&) { return Fixed([](const at::Tensor& a, const at::Tensor& b) { return at::eq(a, b); }); });
  Binary(r, "Less",
         [](const NodeInfo&) { return Fixed([](const at::Tensor& a, const at::Tensor& b) { return at::lt(a, b); }); });
  Binary(r, "LessOrEqual",
         [](const NodeInfo&) { return Fixed([](const at::Tensor& a, const at::Tensor& b) { return at::le(a, b); }); });
  Binary(r, "Greater",
         [](const NodeInfo&) { return Fixed([](const at::Tensor& a, const at::Tensor& b) { return at::gt(a, b); }); });
  Binary(r, "GreaterOrEqual",
         [](const NodeInfo&) { return Fixed([](const at::Tensor& a, const at::Tensor& b) { return at::ge(a, b); }); });

  Variadic(
      r, "Sum", [](const at::Tensor& a, const at::Tensor& b) { return at::add(a, b); }, false);
  Variadic(
      r, "Mean", [](const at::Tensor& a, const at::Tensor& b) { return at::add(a, b); }, true);
  Variadic(
      r, "Max", [](const at::Tensor& a, const at::Tensor& b) { return at::maximum(a, b); }, false);
  Variadic(
      r, "Min", [](const at::Tensor& a, const at::Tensor& b) { return at::minimum(a, b); }, false);

  r.Add("", "Where", [](const NodeInfo&) -> Result<Compiled> {
    return Make([](const std::vector<const Value*>& in, std::vector<Value>& out) -> Status {
      INFERD_ASSIGN_OR_RETURN(at::Tensor c, In(in, 0));
      if (in.size() > 2 && in[1] && in[1]->is_strings())
        return Status::InvalidArgument("Where over strings is not supported");
      INFERD_ASSIGN_OR_RETURN(at::Tensor a, In(in, 1));
      INFERD_ASSIGN_OR_RETURN(at::Tensor b, In(in, 2));
      out[0] = Value::Of(at::where(c.to(at::kBool), a, b));
      return Status::OK();
    });
  });

  r.Add("", "Clip", [](const NodeInfo& n) -> Result<Compiled> {
    const bool attrs = n.opset() < 11;
    const float lo = n.Float("min", -std::numeric_limits<float>::infinity());
    const float hi = n.Float("max", std::numeric_limits<float>::infinity());
    return Make([attrs, lo, hi](const std::vector<const Value*>& in, std::vector<Value>& out) -> Status {
      INFERD_ASSIGN_OR_RETURN(at::Tensor x, In(in, 0));
      if (attrs) {
        out[0] = Value::Of(at::clamp(x, lo, hi));
        return Status::OK();
      }
      at::Tensor y = x;
      if (Present(in, 1)) y = at::maximum(y, in[1]->tensor().to(x.scalar_type()));
      if (Present(in, 2)) y = at::minimum(y, in[2]->tensor().to(x.scalar_type()));
      out[0] = Value::Of(Present(in, 1) || Present(in, 2) ? y : x.clone());
      return Status::OK();
    });
  });

  r.Add("", "Cast", [](const NodeInfo& n) -> Result<Compiled> {
    const int32_t to = static_cast<int32_t>(n.Int("to", 0));
    if (to != onnx::TensorProto::STRING && !ScalarTypeOf(to)) return n.Error("cannot cast to " + OnnxTypeName(to));
    return Make([to](const std::vector<const Value*>& in, std::vector<Value>& out) -> Status {
      if (!Present(in, 0)) return Status::InvalidArgument("input 0 is missing");
      INFERD_ASSIGN_OR_RETURN(out[0], CastValue(*in[0], to));
      return Status::OK();
    });
  });
  r.Add("", "CastLike", [](const NodeInfo&) -> Result<Compiled> {
    return Make([](const std::vector<const Value*>& in, std::vector<Value>& out) -> Status {
      if (!Present(in, 0) || !Present(in, 1)) return Status::InvalidArgument("CastLike needs two inputs");
      const int32_t to = in[1]->is_strings() ? static_cast<int32_t>(onnx::TensorProto::STRING)
                                             : OnnxTypeOf(in[1]->tensor().scalar_type());
      INFERD_ASSIGN_OR_RETURN(out[0], CastValue(*in[0], to));
      return Status::OK();
    });
  });

  r.Add("", "Dropout", [](const NodeInfo& n) -> Result<Compiled> {
    const bool two_outputs = n.has_output(1);
    return Make([two_outputs](const std::vector<const Value*>& in, std::vector<Value>& out) -> Status {
      INFERD_ASSIGN_OR_RETURN(at::Tensor x, In(in, 0));
      if (Present(in, 2) && in[2]->tensor().to(at::kBool).item<bool>()) {
        return Status::Unimplemented("Dropout in training mode is not supported");
      }
      out[0] = Value::Of(x);
      if (two_outputs) out[1] = Value::Of(at::ones_like(x, at::kBool));
      return Status::OK();
    });
  });
}

}  // namespace inferd::onnxexec::ops
