// LoRA adapters (llm/lora_adapter.h): adapter_config.json and the tensors of
// adapter_model.safetensors against a small Llama base. The input is the
// config, a NUL byte, then the safetensors file. Invariants: no crash; an
// adapter that loads has both matrices of every targeted module of every
// adapted layer, shaped for the base and the rank.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "llm/lora_adapter.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const size_t nul = in.find('\0');
  if (nul == std::string_view::npos) return 0;
  inferd::llm::LoraLimits limits;
  limits.max_rank = 16;
  auto config = inferd::llm::ParseLoraConfig(in.substr(0, nul), limits);
  if (!config.ok()) return 0;
  auto file = inferd::llm::SafetensorsFile::FromBytes(std::string(in.substr(nul + 1)));
  if (!file.ok()) return 0;
  inferd::llm::DecoderConfig base;
  base.hidden_size = 8;
  base.num_layers = 2;
  base.num_heads = 2;
  base.num_kv_heads = 1;
  base.head_dim = 4;
  base.intermediate_size = 12;
  auto adapter = inferd::llm::ReadLoraAdapter(*config, **file, base);
  if (!adapter.ok()) return 0;
  for (const auto& layer : adapter->layers) {
    for (const auto& p : layer) {
      if (p.empty()) continue;
      if (p.a.size() != static_cast<size_t>(config->rank * p.in) ||
          p.b.size() != static_cast<size_t>(p.out * config->rank))
        std::abort();
    }
  }
  return 0;
}
