// config.pbtxt through ParseModelConfig: protobuf text format, every field
// check, ensemble steps and output rules. A config that parses has its
// ensemble compiled (EnsemblePlan) and each output rule applied to a
// generated answer of its source output, as the server would; its
// speculative-decoding parameters are read as the generative scheduler does.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "repository/model_config.h"
#include "scheduler/ensemble_plan.h"
#include "scheduler/prompt_lookup.h"
#include "server/output_rules.h"

namespace {

constexpr int64_t kMaxElements = 4096;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  auto spec = inferd::ParseModelConfig(text, "m", "fuzz/config.pbtxt");
  if (!spec.ok()) return 0;
  (void)inferd::RenderModelConfigJson(text, *spec);
  if (spec->ensemble) (void)inferd::EnsemblePlan::Compile(*spec);
  (void)inferd::SpeculationOptions::FromSpec(*spec);
  const bool batched = spec->max_batch_size > 0;
  for (const auto& rule : spec->rules) {
    const inferd::TensorSpec* source = spec->FindOutput(rule.source);
    if (source == nullptr || source->dtype == inferd::DataType::kBytes) continue;
    inferd::Shape shape;
    if (batched) shape.push_back(2);
    int64_t n = batched ? 2 : 1;
    for (int64_t d : source->dims) {
      const int64_t size = d < 0 ? 3 : d;
      if (size > kMaxElements || (n *= size) > kMaxElements) return 0;
      shape.push_back(size);
    }
    const size_t elem = inferd::DataTypeByteSize(source->dtype);
    if (elem == 0) continue;
    std::vector<std::byte> bytes(static_cast<size_t>(n) * elem);
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::byte>((i * 37) & 0xff);
    inferd::Tensor t = inferd::Tensor::Copy(source->name, source->dtype, shape, bytes);
    (void)inferd::ApplyRule(rule, t, batched, source->labels.get());
  }
  return 0;
}
