// The kernel of x [..., K] times a constant weight, over any product on
// 2-D inputs (PackedGemm: dnnl_gemm.h; Int8Linear: aten/int8_linear.h): checks
// the input, flattens the leading dimensions, restores them on the answer.
// Thread-safety: the kernel is as thread-safe as P::Run (both are).
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <string>
#include <vector>

#include "backends/onnx/kernel.h"
#include "backends/onnx/ops/op_util.h"

namespace inferd::onnxexec::ops {

// P: k(), n(), Result<at::Tensor> Run(const at::Tensor& x [M, K]) -> [M, N].
template <class P>
Kernel LinearKernel(std::shared_ptr<const P> p) {
  return [p = std::move(p)](const std::vector<const Value*>& in, std::vector<Value>& out) -> Status {
    INFERD_ASSIGN_OR_RETURN(at::Tensor x, In(in, 0));
    const int64_t k = p->k();
    if (x.scalar_type() != at::kFloat || x.dim() < 1 || x.size(-1) != k) {
      return Status::InvalidArgument("takes a float [..., " + std::to_string(k) + "] input here, got " +
                                     std::string(c10::toString(x.scalar_type())) + " " + c10::str(x.sizes()));
    }
    std::vector<int64_t> shape = x.sizes().vec();
    shape.back() = p->n();
    if (x.numel() == 0) {
      out[0] = Value::Of(at::zeros(shape, x.options()));
      return Status::OK();
    }
    INFERD_ASSIGN_OR_RETURN(at::Tensor y, p->Run(x.reshape({-1, k})));
    out[0] = Value::Of(y.view(shape));
    return Status::OK();
  };
}

}  // namespace inferd::onnxexec::ops
