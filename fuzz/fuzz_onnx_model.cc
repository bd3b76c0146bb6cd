// ONNX model files through the ONNX backend's load path: protobuf parsing,
// the opset and external-data checks, ONNX's checker and shape inference,
// plan compilation with constant folding (kernels built and run at load) and,
// when a model loads, one run on small generated inputs.
//
// Built as C++17: clang 14 cannot compile libtorch's headers as C++20 against
// libstdc++ 12 (incomplete c10::IValue in constexpr std::vector); the sources
// compile unchanged either way.
#include <ATen/Parallel.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "backends/aten/alloc_limit.h"
#include "backends/onnx/kernel.h"
#include "backends/onnx/model_loader.h"
#include "backends/onnx/tensor_proto.h"

namespace {

using inferd::onnxexec::Value;

// Inputs of at most this many elements are generated; larger ones skip the run.
constexpr int64_t kMaxElements = 4096;
// The per-tensor cap the backend applies (alloc_limit.h), lowered to stay far
// below libFuzzer's 2 GiB memory limit.
constexpr int64_t kMaxTensorBytes = int64_t{64} << 20;

bool MakeInput(const inferd::onnxexec::IoInfo& io, Value* out) {
  if (!io.is_tensor) return false;
  std::vector<int64_t> dims;
  int64_t n = 1;
  for (int64_t d : io.dims) {
    const int64_t size = d < 0 ? 2 : d;
    if (size > kMaxElements) return false;
    n *= size;
    if (n > kMaxElements) return false;
    dims.push_back(size);
  }
  if (io.elem_type == 8) {  // STRING
    inferd::onnxexec::StringTensor s;
    s.shape = dims;
    for (int64_t i = 0; i < n; ++i) s.data.push_back(std::string(static_cast<size_t>(i % 3), 'a'));
    *out = Value::Of(std::move(s));
    return true;
  }
  auto type = inferd::onnxexec::ScalarTypeOf(io.elem_type);
  if (!type) return false;
  // Small values of every sign: indices stay mostly in range, divisors vary.
  at::Tensor t = at::arange(n, at::kDouble).remainder(5).sub(2).reshape(dims).to(*type);
  *out = Value::Of(std::move(t));
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto* registry = [] {
    at::set_num_threads(1);
    inferd::aten::InstallAllocationLimit();
    return inferd::onnxexec::MakeOpRegistry().release();
  }();
  // Inputs of odd length load with the int8 registry (quantization "int8": int8_ops.cc, the QDQ readers).
  static const auto* int8_registry = inferd::onnxexec::MakeOpRegistry(true, true, /*int8=*/true).release();
  c10::InferenceMode inference;
  inferd::aten::AllocationLimitScope limit(kMaxTensorBytes);
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  // External data resolves inside a folder that does not exist: every
  // reference must fail the load cleanly.
  // INFERD_FUZZ_VERBOSE=1 prints what became of an input (for regressions).
  static const bool verbose = std::getenv("INFERD_FUZZ_VERBOSE") != nullptr;
  auto model =
      inferd::onnxexec::LoadOnnxModel(bytes, "/nonexistent/inferd-fuzz", size % 2 ? *int8_registry : *registry);
  if (!model.ok()) {
    if (verbose) std::fprintf(stderr, "load: %s\n", model.status().ToString().c_str());
    return 0;
  }
  std::vector<Value> inputs;
  for (const auto& io : model->inputs) {
    Value v;
    if (!MakeInput(io, &v)) {
      if (verbose) std::fprintf(stderr, "input '%s': not generated\n", io.name.c_str());
      return 0;
    }
    inputs.push_back(std::move(v));
  }
  std::vector<Value> outputs;
  inferd::Status run = model->plan->Run(std::move(inputs), &outputs);
  if (verbose) std::fprintf(stderr, "run: %s\n", run.ToString().c_str());
  return 0;
}
