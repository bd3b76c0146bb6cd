// Conversions between inferd tensors and libtorch (ATen) tensors, shared by
// the backends built on libtorch (torchscript/, onnx/). libtorch headers
// appear only in those folders and here.
#pragma once

#include <torch/script.h>

#include <optional>

#include "core/status.h"
#include "core/tensor.h"

namespace inferd::aten {

// nullopt for types libtorch 1.13 lacks (UINT16/32/64) and BYTES.
std::optional<at::ScalarType> ToTorchType(DataType dt);
std::optional<DataType> FromTorchType(at::ScalarType st);

// An exception's message without libtorch's C++ backtrace. A message longer
// than `limit` keeps its end: TorchScript puts the interpreter's traceback
// first and the actual error last.
std::string Message(const std::exception& e, size_t limit);

// A libtorch view of `t` (no copy). The view must not outlive `t.owner`.
Result<at::Tensor> ToTorch(const Tensor& t);

// Wraps a libtorch tensor (made contiguous) as an inferd Tensor that keeps it
// alive through `owner` (no copy for contiguous CPU tensors).
Result<Tensor> FromTorch(at::Tensor t, std::string name);

}  // namespace inferd::aten
