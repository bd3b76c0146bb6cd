// Loss ops of the default domain: NegativeLogLikelihoodLoss and
// SoftmaxCrossEntropyLoss (reduction none | sum | mean, class weights,
// ignore_index), over ATen's nll_loss.
#include <ATen/core/Reduction.h>

#include "backends/onnx/ops/op_util.h"

namespace inferd::onnxexec::ops {
namespace {

using Args = const std::vector<const Value*>&;
using Outs = std::vector<Value>&;

Result<int64_t> ReductionOf(const NodeInfo& n) {
  const std::string r = n.String("reduction", "mean");
  if (r == "none") return at::Reduction::None;
  if (r == "sum") return at::Reduction::Sum;
  if (r == "mean") return at::Reduction::Mean;
  return n.Error("unknown reduction '" + r + "'");
}

// NegativeLogLikelihoodLoss takes log-probabilities; SoftmaxCrossEntropyLoss
// takes scores (and may also answer their log-softmax).
Result<Compiled> Loss(const NodeInfo& n, bool from_scores) {
  INFERD_ASSIGN_OR_RETURN(int64_t reduction, ReductionOf(n));
  return Make([reduction, from_scores, ignore = n.Int("ignore_index", -100)](Args in, Outs out) -> Status {
    INFERD_ASSIGN_OR_RETURN(at::Tensor x, In(in, 0));
    INFERD_ASSIGN_OR_RETURN(at::Tensor t, In(in, 1));
    c10::optional<at::Tensor> w;
    if (Present(in, 2)) w = in[2]->tensor();
    at::Tensor log_prob = from_scores ? at::log_softmax(x, 1) : x;
    out[0] = Value::Of(at::nll_loss_nd(log_prob, t.to(at::kLong), w, reduction, ignore));
    if (from_scores && out.size() > 1) out[1] = Value::Of(log_prob);
    return Status::OK();
  });
}

}  // namespace

void RegisterLossOps(OpRegistry& r) {
  r.Add("", "NegativeLogLikelihoodLoss", [](const NodeInfo& n) { return Loss(n, false); });
  r.Add("", "SoftmaxCrossEntropyLoss", [](const NodeInfo& n) { return Loss(n, true); });
}

}  // namespace inferd::onnxexec::ops
