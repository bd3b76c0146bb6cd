#include "backends/echo.h"

namespace inferd {

Status CheckEchoSpec(const ModelSpec& spec, const std::string& what) {
  if (spec.outputs.size() != spec.inputs.size())
    return Status::InvalidArgument(what + " needs as many outputs as inputs");
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    if (spec.inputs[i].dtype != spec.outputs[i].dtype) {
      return Status::InvalidArgument(what + ": output '" + spec.outputs[i].name +
                                     "' must have the datatype of input '" + spec.inputs[i].name + "'");
    }
  }
  return Status::OK();
}

std::vector<Tensor> EchoInputs(const ModelSpec& spec, const std::vector<Tensor>& inputs) {
  std::vector<Tensor> out;
  for (size_t i = 0; i < inputs.size() && i < spec.outputs.size(); ++i) {
    Tensor t = inputs[i];
    t.name = spec.outputs[i].name;
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace inferd
