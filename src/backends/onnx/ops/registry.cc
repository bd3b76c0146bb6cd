#include "backends/onnx/ops/op_util.h"

namespace inferd::onnxexec {

std::unique_ptr<OpRegistry> MakeOpRegistry(bool optimized, bool winograd, bool int8) {
  auto r = std::make_unique<OpRegistry>();
  ops::RegisterElementwiseOps(*r);
  ops::RegisterShapeOps(*r);
  ops::RegisterNnOps(*r);
  ops::RegisterReduceOps(*r);
  ops::RegisterSequenceOps(*r);
  ops::RegisterControlOps(*r);
  ops::RegisterRnnOps(*r);
  ops::RegisterTrainingOps(*r);
  ops::RegisterLossOps(*r);
  ops::RegisterResizeOps(*r);
  ops::RegisterQuantizedOps(*r);
  if (optimized) ops::RegisterMkldnnOps(*r, winograd);
  if (optimized && int8) ops::RegisterInt8Ops(*r);
  return r;
}

}  // namespace inferd::onnxexec
