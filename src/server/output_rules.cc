#include "server/output_rules.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "server/classification.h"

namespace inferd {
namespace {

struct Entry {
  int64_t index;  // -1: below the threshold
  float score;
  std::string label;
};

Tensor FloatTensor(const std::string& name, Shape shape, const std::vector<float>& v) {
  return Tensor::Copy(name, DataType::kFp32, std::move(shape), std::as_bytes(std::span<const float>(v)));
}

}  // namespace

RulePlan PlanRules(const ModelSpec& spec, InferRequest* request) {
  RulePlan plan;
  if (spec.rules.empty()) return plan;
  plan.batched = spec.max_batch_size > 0;
  auto add = [&](const OutputRule& r) {
    const TensorSpec* source = spec.FindOutput(r.source);
    plan.rules.push_back({r, source ? source->labels : nullptr});
  };
  if (request->outputs.empty()) {
    for (const OutputRule& r : spec.rules) add(r);
    return plan;
  }
  std::vector<RequestedOutput> model_outputs;
  for (const RequestedOutput& o : request->outputs) {
    if (const OutputRule* r = spec.FindRule(o.name)) {
      add(*r);
    } else {
      model_outputs.push_back(o);
    }
  }
  for (const auto& r : plan.rules) {
    auto listed = [&](const RequestedOutput& o) { return o.name == r.rule.source; };
    if (std::none_of(model_outputs.begin(), model_outputs.end(), listed)) {
      model_outputs.push_back(RequestedOutput{r.rule.source});
      plan.drop.push_back(r.rule.source);
    }
  }
  request->outputs = std::move(model_outputs);
  return plan;
}

Result<Tensor> ApplyRule(const OutputRule& rule, const Tensor& source, bool batched,
                         const std::vector<std::string>* labels) {
  const std::string what = "rule '" + rule.name + "'";
  if (!IsNumeric(source.dtype)) {
    return Status::InvalidArgument(what + ": output '" + source.name + "' is " +
                                   std::string(DataTypeToWire(source.dtype)) + ", not numeric");
  }
  if (batched && source.shape.empty()) return Status::Internal(what + ": output '" + source.name + "' has no batch");
  const int64_t rows = batched ? source.shape[0] : 1;
  const int64_t n = rows > 0 ? source.element_count() / rows : 0;
  const int64_t k = rule.top_k();
  if (k > n) {
    return Status::InvalidArgument(what + ": output '" + source.name + "' has " + std::to_string(n) +
                                   " entries per row; the rule takes the top " + std::to_string(k));
  }
  std::vector<float> scores_out;
  std::vector<int64_t> indices_out;
  std::string labels_out;
  std::vector<float> values(static_cast<size_t>(n));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < n; ++c) values[c] = ValueAsFloat(source, r * n + c);
    std::vector<Entry> entries;
    for (const OutputRule::Step& s : rule.steps) {
      switch (s.op) {
        case OutputRule::Op::kSoftmax: {
          float top = -INFINITY;
          for (float v : values) top = std::max(top, v);
          double sum = 0;
          for (float& v : values) sum += (v = std::exp(v - top));
          for (float& v : values) v = static_cast<float>(v / sum);
          break;
        }
        case OutputRule::Op::kTopK:
          for (int64_t c : TopIndices(values, static_cast<size_t>(s.k))) entries.push_back({c, values[c], ""});
          break;
        case OutputRule::Op::kThreshold:
          for (Entry& e : entries)
            if (!(e.score >= s.threshold)) e = {-1, e.score, s.fallback};
          break;
        case OutputRule::Op::kLabel:
          for (Entry& e : entries) {
            if (e.index < 0) continue;
            e.label =
                labels && static_cast<size_t>(e.index) < labels->size() ? (*labels)[e.index] : std::to_string(e.index);
          }
          break;
        case OutputRule::Op::kMap:
          for (Entry& e : entries)
            if (auto it = s.renames.find(e.label); it != s.renames.end()) e.label = it->second;
          break;
        case OutputRule::Op::kScore:
          break;
      }
    }
    if (k == 0) {
      scores_out.insert(scores_out.end(), values.begin(), values.end());
      continue;
    }
    for (const Entry& e : entries) {
      switch (rule.dtype()) {
        case DataType::kBytes:
          AppendBytesElement(&labels_out, std::string_view(e.label));
          break;
        case DataType::kFp32:
          scores_out.push_back(e.score);
          break;
        default:
          indices_out.push_back(e.index);
      }
    }
  }
  Shape shape;
  if (k == 0) {
    shape = source.shape;
  } else {
    if (batched) shape.push_back(rows);
    shape.push_back(k);
  }
  switch (rule.dtype()) {
    case DataType::kBytes:
      return Tensor::Own(rule.name, DataType::kBytes, std::move(shape),
                         std::make_shared<const std::string>(std::move(labels_out)));
    case DataType::kFp32:
      return FloatTensor(rule.name, std::move(shape), scores_out);
    default:
      return Tensor::Copy(rule.name, DataType::kInt64, std::move(shape),
                          std::as_bytes(std::span<const int64_t>(indices_out)));
  }
}

Status ApplyRules(const RulePlan& plan, InferResponse* response) {
  std::vector<Tensor> added;
  for (const auto& r : plan.rules) {
    auto it = std::find_if(response->outputs.begin(), response->outputs.end(),
                           [&](const Tensor& t) { return t.name == r.rule.source; });
    if (it == response->outputs.end()) {
      return Status::Internal("rule '" + r.rule.name + "': the model did not return output '" + r.rule.source + "'");
    }
    INFERD_ASSIGN_OR_RETURN(Tensor t, ApplyRule(r.rule, *it, plan.batched, r.labels.get()));
    added.push_back(std::move(t));
  }
  std::erase_if(response->outputs, [&](const Tensor& t) {
    return std::find(plan.drop.begin(), plan.drop.end(), t.name) != plan.drop.end();
  });
  for (Tensor& t : added) response->outputs.push_back(std::move(t));
  return Status::OK();
}

std::vector<TensorSpec> RuleOutputSpecs(const ModelSpec& spec) {
  std::vector<TensorSpec> out;
  for (const OutputRule& r : spec.rules) {
    const TensorSpec* source = spec.FindOutput(r.source);
    TensorSpec t;
    t.name = r.name;
    t.dtype = r.dtype();
    if (source) {
      t.dims = r.dims(source->dims);
      t.any_rank = source->any_rank && r.top_k() == 0;
    }
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace inferd
