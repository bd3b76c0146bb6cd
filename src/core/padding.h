// Padding tensors along one dimension: what sequence bucketing does to a
// batch's inputs (scheduler/batch_executor.cc) and to its outputs' rows.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"

namespace inferd {

// Concatenates `parts` along dimension 0, each padded along `axis` (>= 1) to
// `length` with copies of `pad` (one element's bytes). All parts share dtype
// (not BYTES), rank and every dimension but 0 and `axis`, and none is longer
// than `length` along `axis`; else INVALID_ARGUMENT.
Result<Tensor> PadConcat(const std::vector<const Tensor*>& parts, size_t axis, int64_t length, std::string_view pad,
                         std::string name);

// A tensor of `shape` holding copies of `element` (one element's bytes).
Tensor FilledTensor(std::string name, DataType dtype, Shape shape, std::string_view element);

// `t` cut back to `length` along `axis` (>= 1): a copy, or `t` itself when it
// already has that length. INVALID_ARGUMENT when `t` is shorter or has no
// such axis.
Result<Tensor> CutAxis(const Tensor& t, size_t axis, int64_t length);

}  // namespace inferd
