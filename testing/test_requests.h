// Helpers for building requests in unit tests.
#pragma once

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/infer_request.h"
#include "scheduler/pending_request.h"

namespace inferd::testing {

// An FP32 tensor of `shape` filled with `values` (repeated if shorter).
inline Tensor F32(std::string name, Shape shape, std::vector<float> values) {
  const int64_t n = ElementCount(shape);
  std::vector<float> data(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    data[static_cast<size_t>(i)] = values.empty() ? 0.f : values[static_cast<size_t>(i) % values.size()];
  return Tensor::Copy(std::move(name), DataType::kFp32, std::move(shape),
                      std::span<const std::byte>(reinterpret_cast<const std::byte*>(data.data()), data.size() * 4));
}

inline std::vector<float> ToFloats(const Tensor& t) {
  std::vector<float> v(t.byte_size / 4);
  if (!v.empty()) std::memcpy(v.data(), t.data, t.byte_size);
  return v;
}

// A pending request for model "m" with one FP32 input "x" of [rows, width].
inline std::unique_ptr<PendingRequest> Pending(
    int64_t rows, int64_t width = 2, uint32_t priority = 0, uint64_t timeout_us = 0,
    InferCallback cb = [](Result<InferResponse>) {}) {
  auto p = std::make_unique<PendingRequest>();
  p->request = std::make_unique<InferRequest>();
  p->request->model_name = "m";
  p->request->priority = priority;
  p->request->timeout_us = timeout_us;
  p->request->inputs.push_back(F32("x", {rows, width}, {static_cast<float>(rows)}));
  p->rows = rows;
  p->callback = std::move(cb);
  return p;
}

}  // namespace inferd::testing
