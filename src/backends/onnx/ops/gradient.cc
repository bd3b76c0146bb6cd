// The training-domain Gradient op (ai.onnx.preview.training): dy/dx for
// graph inputs x, computed by libtorch's autograd over the kernels that
// produced y. Only the conformance data uses it; serving never does.
#include <torch/csrc/autograd/autograd.h>

#include "backends/onnx/ops/op_util.h"

namespace inferd::onnxexec::ops {

void RegisterTrainingOps(OpRegistry& r) {
  r.Add("ai.onnx.preview.training", "Gradient", [](const NodeInfo& n) -> Result<Compiled> {
    const std::vector<std::string> xs = n.Strings("xs");
    const std::string y = n.String("y", "");
    if (xs.empty() || y.empty()) return n.Error("Gradient needs attributes xs and y");
    if (n.num_outputs() != xs.size()) return n.Error("Gradient has one output per xs entry");
    const size_t explicit_inputs = n.num_inputs();
    Compiled c;
    c.grad_inputs = xs;
    c.implicit_inputs = {y};
    c.kernel = [explicit_inputs, count = xs.size()](const std::vector<const Value*>& in,
                                                    std::vector<Value>& out) -> Status {
      INFERD_ASSIGN_OR_RETURN(at::Tensor yv, In(in, explicit_inputs));
      std::vector<at::Tensor> xv;
      for (size_t i = 0; i < count; ++i) {
        INFERD_ASSIGN_OR_RETURN(at::Tensor x, In(in, i));
        xv.push_back(x);
      }
      if (!yv.requires_grad()) return Status::InvalidArgument("y does not depend on xs");
      auto grads = torch::autograd::grad({yv}, xv, {at::ones_like(yv)}, /*retain_graph=*/true,
                                         /*create_graph=*/false, /*allow_unused=*/true);
      for (size_t i = 0; i < count; ++i)
        out[i] = Value::Of(grads[i].defined() ? grads[i].detach() : at::zeros_like(xv[i]).detach());
      return Status::OK();
    };
    return c;
  });
}

}  // namespace inferd::onnxexec::ops
