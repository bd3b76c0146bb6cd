// Sequence and optional ops, and StringNormalizer (string tensors).
#include <algorithm>
#include <cctype>
#include <set>

#include "backends/onnx/ops/op_util.h"
#include "backends/onnx/tensor_proto.h"

namespace inferd::onnxexec::ops {
namespace {

using Args = const std::vector<const Value*>&;
using Outs = std::vector<Value>&;

Result<const std::vector<Value>*> Seq(Args in, size_t i) {
  if (!Present(in, i) || !in[i]->is_sequence())
    return Status::InvalidArgument("input " + std::to_string(i) + " is not a sequence");
  return &in[i]->sequence();
}

Result<int64_t> Position(Args in, size_t i, int64_t size, int64_t fallback, bool insert) {
  if (!Present(in, i)) return fallback;
  INFERD_ASSIGN_OR_RETURN(at::Tensor p, In(in, i));
  int64_t pos = p.to(at::kLong).item<int64_t>();
  if (pos < 0) pos += size;
  if (pos < 0 || pos > size || (!insert && pos == size))
    return Status::InvalidArgument("sequence position out of range");
  return pos;
}

int32_t ElemType(const Value& v) {
  if (v.is_strings()) return onnx::TensorProto::STRING;
  return v.is_tensor() ? OnnxTypeOf(v.tensor().scalar_type()) : 0;
}

std::string Lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
std::string Upper(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

void RegisterSequenceOps(OpRegistry& r) {
  r.Add("", "SequenceEmpty", [](const NodeInfo& n) -> Result<Compiled> {
    const int32_t dtype = static_cast<int32_t>(n.Int("dtype", onnx::TensorProto::FLOAT));
    return Make([dtype](Args, Outs out) -> Status {
      out[0] = Value::Sequence({}, dtype);
      return Status::OK();
    });
  });
  r.Add("", "SequenceConstruct", [](const NodeInfo&) -> Result<Compiled> {
    return Make([](Args in, Outs out) -> Status {
      std::vector<Value> items;
      for (const Value* v : in) {
        if (!v) return Status::InvalidArgument("SequenceConstruct input missing");
        items.push_back(*v);
      }
      const int32_t t = items.empty() ? 0 : ElemType(items[0]);
      out[0] = Value::Sequence(std::move(items), t);
      return Status::OK();
    });
  });
  r.Add("", "SequenceInsert", [](const NodeInfo&) -> Result<Compiled> {
    return Make([](Args in, Outs out) -> Status {
      INFERD_ASSIGN_OR_RETURN(const std::vector<Value>* s, Seq(in, 0));
      if (!Present(in, 1)) return Status::InvalidArgument("SequenceInsert needs a tensor");
      const int64_t n = static_cast<int64_t>(s->size());
      INFERD_ASSIGN_OR_RETURN(int64_t pos, Position(in, 2, n, n, true));
      std::vector<Value> items = *s;
      items.insert(items.begin() + pos, *in[1]);
      out[0] = Value::Sequence(std::move(items), ElemType(*in[1]));
      return Status::OK();
    });
  });
  r.Add("", "SequenceAt", [](const NodeInfo&) -> Result<Compiled> {
    return Make([](Args in, Outs out) -> Status {
      INFERD_ASSIGN_OR_RETURN(const std::vector<Value>* s, Seq(in, 0));
      INFERD_ASSIGN_OR_RETURN(int64_t pos, Position(in, 1, static_cast<int64_t>(s->size()), -1, false));
      if (pos < 0) return Status::InvalidArgument("SequenceAt needs a position");
      out[0] = (*s)[pos];
      return Status::OK();
    });
  });
  r.Add("", "SequenceErase", [](const NodeInfo&) -> Result<Compiled> {
    return Make([](Args in, Outs out) -> Status {
      INFERD_ASSIGN_OR_RETURN(const std::vector<Value>* s, Seq(in, 0));
      const int64_t n = static_cast<int64_t>(s->size());
      if (n == 0) return Status::InvalidArgument("SequenceErase on an empty sequence");
      INFERD_ASSIGN_OR_RETURN(int64_t pos, Position(in, 1, n, n - 1, false));
      std::vector<Value> items = *s;
      items.erase(items.begin() + pos);
      out[0] = Value::Sequence(std::move(items), in[0]->sequence_elem_type());
      return Status::OK();
    });
  });
  r.Add("", "SequenceLength", [](const NodeInfo&) -> Result<Compiled> {
    return Make([](Args in, Outs out) -> Status {
      INFERD_ASSIGN_OR_RETURN(const std::vector<Value>* s, Seq(in, 0));
      out[0] = Value::Of(at::scalar_tensor(static_cast<int64_t>(s->size()), at::kLong));
      return Status::OK();
    });
  });
  r.Add("", "ConcatFromSequence", [](const NodeInfo& n) -> Result<Compiled> {
    return Make([axis = n.Int("axis", 0), new_axis = n.Int("new_axis", 0) != 0](Args in, Outs out) -> Status {
      INFERD_ASSIGN_OR_RETURN(const std::vector<Value>* s, Seq(in, 0));
      if (s->empty()) return Status::InvalidArgument("ConcatFromSequence of an empty sequence");
      std::vector<at::Tensor> parts;
      for (const auto& v : *s) {
        if (!v.is_tensor()) return Status::InvalidArgument("ConcatFromSequence of non-tensors");
        parts.push_back(v.tensor());
      }
      const int64_t rank = parts[0].dim() + (new_axis ? 1 : 0);
      INFERD_ASSIGN_OR_RETURN(int64_t a, Axis(axis, rank));
      out[0] = Value::Of(new_axis ? at::stack(parts, a) : at::cat(parts, a));
      return Status::OK();
    });
  });
  r.Add("", "SplitToSequence", [](const NodeInfo& n) -> Result<Compiled> {
    return Make([axis = n.Int("axis", 0), keep = n.Int("keepdims", 1) != 0](Args in, Outs out) -> Status {
      INFERD_ASSIGN_OR_RETURN(at::Tensor x, In(in, 0));
      INFERD_ASSIGN_OR_RETURN(int64_t a, Axis(axis, x.dim()));
      std::vector<at::Tensor> parts;
      if (!Present(in, 1)) {
        parts = at::split(x, 1, a);
        if (!keep)
          for (auto& p : parts) p = p.squeeze(a);
      } else {
        const at::Tensor& sp = in[1]->tensor();
        if (sp.dim() == 0) {
          parts = at::split(x, sp.to(at::kLong).item<int64_t>(), a);
        } else {
          parts = at::split_with_sizes(x, Ints(sp), a);
        }
      }
      std::vector<Value> items;
      for (auto& p : parts) items.push_back(Value::Of(p));
      out[0] = Value::Sequence(std::move(items), OnnxTypeOf(x.scalar_type()));
      return Status::OK();
    });
  });
  r.Add("", "Optional", [](const NodeInfo&) -> Result<Compiled> {
    return Make([](Args in, Outs out) -> Status {
      out[0] = Present(in, 0) ? *in[0] : Value::NoneOptional();
      return Status::OK();
    });
  });
  r.Add("", "OptionalHasElement", [](const NodeInfo&) -> Result<Compiled> {
    return Make([](Args in, Outs out) -> Status {
      const bool has = Present(in, 0) && in[0]->kind() != Value::Kind::kNoneOptional;
      out[0] = Value::Of(at::scalar_tensor(has, at::kBool));
      return Status::OK();
    });
  });
  r.Add("", "OptionalGetElement", [](const NodeInfo&) -> Result<Compiled> {
    return Make([](Args in, Outs out) -> Status {
      if (!Present(in, 0) || in[0]->kind() == Value::Kind::kNoneOptional) {
        return Status::InvalidArgument("OptionalGetElement of an empty optional");
      }
      out[0] = *in[0];
      return Status::OK();
    });
  });
  r.Add("", "StringNormalizer", [](const NodeInfo& n) -> Result<Compiled> {
    const std::string action = n.String("case_change_action", "NONE");
    if (action != "NONE" && action != "LOWER" && action != "UPPER") return n.Error("unknown case_change_action");
    const bool sensitive = n.Int("is_case_sensitive", 0) != 0;
    std::set<std::string> stop;
    for (const auto& w : n.Strings("stopwords")) stop.insert(sensitive ? w : Lower(w));
    return Make([action, sensitive, stop](Args in, Outs out) -> Status {
      if (!Present(in, 0) || !in[0]->is_strings()) return Status::InvalidArgument("StringNormalizer takes strings");
      const StringTensor& s = in[0]->strings();
      StringTensor r;
      for (const auto& w : s.data) {
        if (stop.count(sensitive ? w : Lower(w))) continue;
        r.data.push_back(action == "LOWER" ? Lower(w) : action == "UPPER" ? Upper(w) : w);
      }
      const bool two_d = s.shape.size() == 2;
      if (r.data.empty()) r.data.push_back("");
      r.shape = two_d ? std::vector<int64_t>{1, static_cast<int64_t>(r.data.size())}
                      : std::vector<int64_t>{static_cast<int64_t>(r.data.size())};
      out[0] = Value::Of(std::move(r));
      return Status::OK();
    });
  });
}

}  // namespace inferd::onnxexec::ops
