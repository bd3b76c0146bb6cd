// Recurrent ops: LSTM (gate order i, o, f, c; peepholes, input_forget),
// GRU (z, r, h; linear_before_reset) and RNN, forward / reverse /
// bidirectional, layouts 0 and 1, sequence_lens, clip and the activation
// functions ONNX names.
#include "backends/onnx/ops/op_util.h"

namespace inferd::onnxexec::ops {
namespace {

using Args = const std::vector<const Value*>&;
using Outs = std::vector<Value>&;
using Act = std::function<at::Tensor(const at::Tensor&)>;

enum class Cell { kLstm, kGru, kRnn };

Result<Act> Activation(const std::string& name, float alpha, float beta, bool has_alpha, bool has_beta) {
  if (name == "Sigmoid") return Act([](const at::Tensor& x) { return at::sigmoid(x); });
  if (name == "Tanh") return Act([](const at::Tensor& x) { return at::tanh(x); });
  if (name == "Relu") return Act([](const at::Tensor& x) { return at::relu(x); });
  if (name == "Softsign") return Act([](const at::Tensor& x) { return x / (at::abs(x) + 1); });
  if (name == "Softplus") return Act([](const at::Tensor& x) { return at::log1p(at::exp(x)); });
  if (name == "HardSigmoid") {
    const double a = has_alpha ? alpha : 0.2, b = has_beta ? beta : 0.5;
    return Act([a, b](const at::Tensor& x) { return at::clamp(x * a + b, 0, 1); });
  }
  if (name == "LeakyRelu") {
    const double a = has_alpha ? alpha : 0.01;
    return Act([a](const at::Tensor& x) { return at::where(x >= 0, x, x * a); });
  }
  if (name == "ThresholdedRelu") {
    const double a = has_alpha ? alpha : 1.0;
    return Act([a](const at::Tensor& x) { return at::where(x > a, x, at::zeros_like(x)); });
  }
  if (name == "Elu") {
    const double a = has_alpha ? alpha : 1.0;
    return Act([a](const at::Tensor& x) { return at::where(x >= 0, x, (at::exp(x) - 1) * a); });
  }
  if (name == "Affine") {
    const double a = has_alpha ? alpha : 1.0, b = has_beta ? beta : 0.0;
    return Act([a, b](const at::Tensor& x) { return x * a + b; });
  }
  if (name == "ScaledTanh") {
    const double a = has_alpha ? alpha : 1.0, b = has_beta ? beta : 1.0;
    return Act([a, b](const at::Tensor& x) { return at::tanh(x * b) * a; });
  }
  return Status::InvalidArgument("activation '" + name + "' is not supported");
}

struct RnnAttrs {
  Cell cell;
  int64_t hidden = 0;
  int dirs = 1;
  bool reverse_only = false;
  bool layout1 = false;
  float clip = 0;
  bool input_forget = false;
  bool linear_before_reset = false;
  std::vector<Act> acts;  // per direction: f, g[, h]
};

// Time index per (t, b) that reverses each sequence within its length.
at::Tensor ReverseIndex(int64_t seq, const at::Tensor& lens) {
  at::Tensor t = at::arange(seq, at::kLong).unsqueeze(1);
  at::Tensor l = lens.unsqueeze(0);
  return at::where(t < l, l - 1 - t, t);
}

at::Tensor TimeGather(const at::Tensor& x, const at::Tensor& idx) {
  // x [seq, batch, ...], idx [seq, batch]
  at::Tensor i = idx;
  for (int64_t d = 2; d < x.dim(); ++d) i = i.unsqueeze(-1);
  return at::gather(x, 0, i.expand(x.sizes()));
}

Status CheckShape(const at::Tensor& t, std::initializer_list<int64_t> want, const char* name) {
  if (t.sizes() != at::IntArrayRef(want)) {
    std::string w = "[";
    for (int64_t d : want) w += (w.size() > 1 ? "," : "") + std::to_string(d);
    return Status::InvalidArgument(std::string(name) + " has shape " + c10::str(t.sizes()) + ", expected " + w + "]");
  }
  return Status::OK();
}

Result<Compiled> Build(const NodeInfo& n, Cell cell) {
  RnnAttrs a;
  a.cell = cell;
  a.hidden = n.Int("hidden_size", 0);
  if (a.hidden <= 0) return n.Error("hidden_size is required");
  const std::string dir = n.String("direction", "forward");
  if (dir == "bidirectional") {
    a.dirs = 2;
  } else if (dir == "reverse") {
    a.reverse_only = true;
  } else if (dir != "forward") {
    return n.Error("unknown direction '" + dir + "'");
  }
  a.layout1 = n.Int("layout", 0) == 1;
  a.clip = n.Float("clip", 0.0f);
  a.input_forget = n.Int("input_forget", 0) != 0;
  a.linear_before_reset = n.Int("linear_before_reset", 0) != 0;
  const size_t per_dir = cell == Cell::kLstm ? 3 : cell == Cell::kGru ? 2 : 1;
  std::vector<std::string> names = n.Strings("activations");
  if (names.empty()) {
    names = cell == Cell::kLstm  ? std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"}
            : cell == Cell::kGru ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                 : std::vector<std::string>{"Tanh"};
    // Both directions use the defaults. (Inserting a vector's own range into
    // it reads through invalidated iterators: copy first.)
    if (a.dirs == 2) {
      const std::vector<std::string> one = names;
      names.insert(names.end(), one.begin(), one.end());
    }
  }
  if (names.size() != per_dir * a.dirs) return n.Error("activations: expected " + std::to_string(per_dir * a.dirs));
  const auto alphas = n.Floats("activation_alpha"), betas = n.Floats("activation_beta");
  for (size_t i = 0; i < names.size(); ++i) {
    auto act = Activation(names[i], i < alphas.size() ? alphas[i] : 0, i < betas.size() ? betas[i] : 0,
                          i < alphas.size(), i < betas.size());
    if (!act.ok()) return n.Error(act.status().message());
    a.acts.push_back(*act);
  }
  return Make([a, per_dir](Args in, Outs out) -> Status {
    INFERD_ASSIGN_OR_RETURN(at::Tensor X, In(in, 0));
    INFERD_ASSIGN_OR_RETURN(at::Tensor W, In(in, 1));
    INFERD_ASSIGN_OR_RETURN(at::Tensor R, In(in, 2));
    if (X.dim() != 3) return Status::InvalidArgument("X must have 3 dimensions, has " + std::to_string(X.dim()));
    if (a.layout1) X = X.transpose(0, 1);  // -> [seq, batch, input]
    const int64_t seq = X.size(0), batch = X.size(1), H = a.hidden;
    const int64_t gates = a.cell == Cell::kLstm ? 4 : a.cell == Cell::kGru ? 3 : 1;
    // The cells index and split these by the shapes the spec states.
    const int64_t input = X.size(2), G = gates * H;
    INFERD_RETURN_IF_ERROR(CheckShape(W, {a.dirs, G, input}, "W"));
    INFERD_RETURN_IF_ERROR(CheckShape(R, {a.dirs, G, H}, "R"));
    if (Present(in, 3)) INFERD_RETURN_IF_ERROR(CheckShape(in[3]->tensor(), {a.dirs, 2 * G}, "B"));
    at::Tensor lens = Present(in, 4) ? in[4]->tensor().to(at::kLong) : at::full({batch}, seq, at::kLong);
    INFERD_RETURN_IF_ERROR(CheckShape(lens, {batch}, "sequence_lens"));
    auto state_in = [&](size_t i) -> c10::optional<at::Tensor> {
      if (!Present(in, i)) return c10::nullopt;
      at::Tensor t = in[i]->tensor();
      return a.layout1 && t.dim() == 3 ? t.transpose(0, 1) : t;  // -> [dirs, batch, H]
    };
    auto h0 = state_in(5), c0 = state_in(6);
    if (h0) INFERD_RETURN_IF_ERROR(CheckShape(*h0, {a.dirs, batch, H}, "initial_h"));
    if (c0) INFERD_RETURN_IF_ERROR(CheckShape(*c0, {a.dirs, batch, H}, "initial_c"));
    if (a.cell == Cell::kLstm && Present(in, 7))
      INFERD_RETURN_IF_ERROR(CheckShape(in[7]->tensor(), {a.dirs, 3 * H}, "P"));
    std::vector<at::Tensor> ys, hs, cs;
    for (int d = 0; d < a.dirs; ++d) {
      const bool reverse = a.reverse_only || d == 1;
      const Act* f = &a.acts[d * per_dir];
      at::Tensor w = W[d], r = R[d];
      at::Tensor wb = at::zeros({gates * H}, X.options()), rb = at::zeros({gates * H}, X.options());
      if (Present(in, 3)) {
        at::Tensor b = in[3]->tensor()[d];
        wb = b.slice(0, 0, gates * H);
        rb = b.slice(0, gates * H, 2 * gates * H);
      }
      at::Tensor rev = reverse ? ReverseIndex(seq, lens) : at::Tensor();
      at::Tensor xs = reverse ? TimeGather(X, rev) : X;
      at::Tensor xw = at::matmul(xs, w.t()) + wb;  // [seq, batch, gates*H]
      at::Tensor h = h0 ? (*h0)[d] : at::zeros({batch, H}, X.options());
      at::Tensor c = c0 ? (*c0)[d] : at::zeros({batch, H}, X.options());
      at::Tensor p;
      if (a.cell == Cell::kLstm && Present(in, 7)) p = in[7]->tensor()[d];
      std::vector<at::Tensor> steps;
      for (int64_t t = 0; t < seq; ++t) {
        at::Tensor valid = (t < lens).unsqueeze(1);
        at::Tensor g = xw[t];
        at::Tensor hn, cn = c;
        auto clip = [&](at::Tensor x) { return a.clip > 0 ? at::clamp(x, -a.clip, a.clip) : x; };
        if (a.cell == Cell::kLstm) {
          g = g + at::matmul(h, r.t()) + rb;
          auto parts = g.chunk(4, 1);  // i, o, f, c
          at::Tensor gi = parts[0], go = parts[1], gf = parts[2], gc = parts[3];
          if (p.defined()) {
            gi = gi + p.slice(0, 0, H) * c;
            gf = gf + p.slice(0, 2 * H, 3 * H) * c;
          }
          at::Tensor it = (*f)(clip(gi));
          at::Tensor ft = a.input_forget ? 1 - it : (*f)(clip(gf));
          at::Tensor ct = f[1](clip(gc));
          cn = ft * c + it * ct;
          if (p.defined()) go = go + p.slice(0, H, 2 * H) * cn;
          at::Tensor ot = (*f)(clip(go));
          hn = ot * f[2](cn);
        } else if (a.cell == Cell::kGru) {
          auto xg = g.chunk(3, 1);
          auto rw = r.chunk(3, 0);
          auto rbs = rb.chunk(3, 0);
          at::Tensor zt = (*f)(clip(xg[0] + at::matmul(h, rw[0].t()) + rbs[0]));
          at::Tensor rt = (*f)(clip(xg[1] + at::matmul(h, rw[1].t()) + rbs[1]));
          at::Tensor ht = a.linear_before_reset ? f[1](clip(xg[2] + rt * (at::matmul(h, rw[2].t()) + rbs[2])))
                                                : f[1](clip(xg[2] + at::matmul(rt * h, rw[2].t()) + rbs[2]));
          hn = (1 - zt) * ht + zt * h;
        } else {
          hn = (*f)(clip(g + at::matmul(h, r.t()) + rb));
        }
        h = at::where(valid, hn, h);
        c = at::where(valid, cn, c);
        steps.push_back(at::where(valid, hn, at::zeros_like(hn)));
      }
      at::Tensor y = seq > 0 ? at::stack(steps, 0) : at::zeros({0, batch, H}, X.options());
      if (reverse && seq > 0) y = TimeGather(y, rev);
      ys.push_back(y);
      hs.push_back(h);
      cs.push_back(c);
    }
    at::Tensor Y = at::stack(ys, 1);  // [seq, dirs, batch, H]
    at::Tensor Yh = at::stack(hs, 0), Yc = at::stack(cs, 0);
    if (a.layout1) {
      Y = Y.permute({2, 0, 1, 3});  // [batch, seq, dirs, H]
      Yh = Yh.transpose(0, 1);
      Yc = Yc.transpose(0, 1);
    }
    if (out.size() > 0) out[0] = Value::Of(Y);
    if (out.size() > 1) out[1] = Value::Of(Yh);
    if (out.size() > 2) out[2] = Value::Of(Yc);
    return Status::OK();
  });
}

}  // namespace

void RegisterRnnOps(OpRegistry& r) {
  r.Add("", "LSTM", [](const NodeInfo& n) { return Build(n, Cell::kLstm); });
  r.Add("", "GRU", [](const NodeInfo& n) { return Build(n, Cell::kGru); });
  r.Add("", "RNN", [](const NodeInfo& n) { return Build(n, Cell::kRnn); });
}

}  // namespace inferd::onnxexec::ops
