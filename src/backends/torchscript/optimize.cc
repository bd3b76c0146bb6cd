#include "backends/torchscript/optimize.h"

#include <charconv>
#include <chrono>
#include <sstream>

#include "backends/aten/torch_convert.h"

namespace inferd::torchscript {
namespace {

constexpr double kTolerance = 1e-4;

// A generated input for config input `t` (its shape and datatype known: WhyUncheckable said so).
at::Tensor ProbeInput(const ModelSpec& spec, const TensorSpec& t, at::Generator& gen) {
  const Shape& dims = t.reshape ? *t.reshape : t.dims;
  std::vector<int64_t> shape;
  if (spec.max_batch_size > 0) shape.push_back(std::min<int64_t>(2, spec.max_batch_size));
  for (int64_t d : dims) shape.push_back(d < 0 ? 1 : d);
  const auto type = *aten::ToTorchType(t.dtype);
  const auto options = at::TensorOptions().dtype(type);
  if (at::isFloatingType(type)) return at::rand(shape, gen, options);
  return at::zeros(shape, options);  // indices, counts, flags: 0 is valid for every model that takes them
}

// The tensors of a forward() result, in order (tuple/list elements, dict
// values by key order).
bool Flatten(const c10::IValue& v, std::vector<at::Tensor>* out) {
  if (v.isTensor()) {
    out->push_back(v.toTensor());
    return true;
  }
  if (v.isTuple()) {
    for (const auto& e : v.toTupleRef().elements())
      if (!Flatten(e, out)) return false;
    return true;
  }
  if (v.isList()) {
    for (const auto& e : v.toListRef())
      if (!Flatten(e, out)) return false;
    return true;
  }
  if (v.isGenericDict()) {
    for (const auto& kv : v.toGenericDict())
      if (!Flatten(kv.value(), out)) return false;
    return true;
  }
  return false;
}

}  // namespace

std::string WhyUncheckable(const ModelSpec& spec) {
  for (const TensorSpec& t : spec.inputs) {
    if (t.any_rank || !aten::ToTorchType(t.dtype)) {
      return "input '" + t.name + "' has no known shape to check the optimised module";
    }
  }
  return {};
}

void WarmUpLibtorch() {
  try {
    torch::jit::Module m("inferd_warmup");
    m.register_parameter("w", torch::ones({4, 4}), /*is_buffer=*/false);
    m.register_parameter("b", torch::zeros({4}), /*is_buffer=*/false);
    m.define(R"(
def forward(self, x):
    return torch.relu(torch.linear(x, self.w, self.b))
)");
    // Through a saved archive, as models arrive (deserialisation and the
    // compiler's builtins are initialised on first use).
    std::stringstream archive;
    m.save(archive);
    m = torch::jit::load(archive, torch::kCPU);
    m.eval();
    ModelSpec spec;
    spec.max_batch_size = 2;
    TensorSpec x;
    x.name = "x";
    x.dtype = DataType::kFp32;
    x.dims = {4};
    spec.inputs.push_back(x);
    for (int i = 0; i < 3; ++i) {  // the profiling executor specialises on the second and third runs
      torch::NoGradGuard no_grad;
      m.forward({torch::ones({2, 4})});
    }
    Optimized o = OptimizeForInference(std::make_shared<torch::jit::Module>(m), spec, {0}, 1);
    c10::InferenceMode guard;
    for (int i = 0; i < 3; ++i) o.module->forward({torch::ones({2, 4})});
  } catch (const std::exception&) {
    // Only a measurement nicety: a model load reports any real problem.
  }
}

Result<OptimizePolicy> OptimizePolicyOf(const ModelSpec& spec, uint64_t module_file_bytes) {
  OptimizePolicy p;
  if (auto it = spec.parameters.find("OPTIMIZE_AFTER_RUNS"); it != spec.parameters.end()) {
    const std::string& v = it->second;
    uint64_t n = 0;
    auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (ec != std::errc() || end != v.data() + v.size()) {
      return Status::InvalidArgument("parameter OPTIMIZE_AFTER_RUNS: '" + v + "' is not a count of runs");
    }
    p.after_runs = n;
  }
  auto it = spec.parameters.find("OPTIMIZE_FOR_INFERENCE");
  const std::string v = it == spec.parameters.end() ? "auto" : it->second;
  if (v == "true" || v == "1") {
    p.when = OptimizeWhen::kAtLoad;
  } else if (v == "false" || v == "0") {
    p.when = OptimizeWhen::kNever;
  } else if (v == "auto") {
    const bool now = module_file_bytes >= kOptimizeAtLoadBytes || p.after_runs == 0;
    p.when = now ? OptimizeWhen::kAtLoad : OptimizeWhen::kWhenHot;
  } else {
    return Status::InvalidArgument("parameter OPTIMIZE_FOR_INFERENCE: '" + v + "' (expected true, false or auto)");
  }
  return p;
}

Optimized OptimizeForInference(std::shared_ptr<torch::jit::Module> plain, const ModelSpec& spec,
                               const std::vector<size_t>& arg_index, size_t num_args, bool int8) {
  const auto t0 = std::chrono::steady_clock::now();
  Optimized out;
  out.module = plain;
  auto done = [&](std::string why) {
    if (!why.empty()) out.int8 = {};  // the plain module serves: nothing was replaced
    out.why_not = std::move(why);
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return out;
  };
  if (std::string why = WhyUncheckable(spec); !why.empty()) return done(std::move(why));
  at::Generator gen = at::detail::createCPUGenerator(/*seed_in=*/1);
  std::vector<c10::IValue> args(num_args);
  for (size_t i = 0; i < spec.inputs.size(); ++i) args[arg_index[i]] = ProbeInput(spec, spec.inputs[i], gen);
  try {
    std::vector<at::Tensor> want, got;
    {
      torch::NoGradGuard no_grad;
      if (!Flatten(plain->forward(args), &want)) return done("the module returns something other than tensors");
    }
    auto frozen = torch::jit::freeze(*plain);
    if (int8) out.int8 = RewriteLinearsToInt8(frozen);  // before optimize_for_inference makes aten::linear a matmul
    auto optimized = std::make_shared<torch::jit::Module>(torch::jit::optimize_for_inference(frozen));
    {
      torch::NoGradGuard no_grad;
      if (!Flatten(optimized->forward(args), &got)) return done("the optimised module returns something else");
    }
    if (got.size() != want.size()) return done("the optimised module returns a different number of tensors");
    for (size_t i = 0; i < want.size(); ++i) {
      const at::Tensor a = want[i].contiguous();
      const at::Tensor b = (got[i].is_mkldnn() ? got[i].to_dense() : got[i]).contiguous();
      if (a.sizes() != b.sizes() || a.scalar_type() != b.scalar_type()) {
        return done("output " + std::to_string(i) + " of the optimised module differs in shape or datatype");
      }
      if (at::isFloatingType(a.scalar_type())) {
        if (a.numel() > 0) {
          out.max_abs_diff =
              std::max(out.max_abs_diff, (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>());
        }
        if (out.int8.layers == 0 && !at::allclose(a, b, kTolerance, kTolerance, /*equal_nan=*/true)) {
          return done("output " + std::to_string(i) + " of the optimised module differs from the plain one by " +
                      std::to_string(out.max_abs_diff));
        }
      } else if (out.int8.layers == 0 && !at::equal(a, b)) {
        return done("output " + std::to_string(i) + " of the optimised module differs from the plain one");
      }
    }
    out.module = std::move(optimized);
    out.optimized = true;
    return done("");
  } catch (const std::exception& e) {
    out.module = plain;
    std::string why = aten::Message(e, 2000);
    if (auto nl = why.rfind('\n'); nl != std::string::npos) why = why.substr(nl + 1);  // the error, not the traceback
    return done("optimisation failed: " + why);
  }
}

}  // namespace inferd::torchscript
