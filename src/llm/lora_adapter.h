// LoRA adapters in PEFT's format (Hugging Face `peft`): a folder with
// adapter_config.json (r, lora_alpha, target_modules, base_model_name_or_path,
// use_rslora, layers_to_transform) and adapter_model.safetensors, whose
// tensors are named like
//   base_model.model.model.layers.3.self_attn.q_proj.lora_A.weight  [r, in]
//   base_model.model.model.layers.3.self_attn.q_proj.lora_B.weight  [out, r]
// (an adapter name before ".weight", as some PEFT versions save, is accepted).
// A targeted module's weight becomes W + scale * B A, scale = lora_alpha / r
// (lora_alpha / sqrt(r) with use_rslora). Llama-architecture bases only, on
// q/k/v/o_proj and gate/up/down_proj.
//
// Everything is checked before use: the config's fields and limits (rank at
// most LoraLimits::max_rank), every tensor name, dtype and shape against the
// base model's config (so an adapter trained for another base fails by its
// shapes, naming the module), every targeted module of every adapted layer
// present with both matrices, nothing else in the file. PEFT features inferd
// does not apply are refused by name (DoRA, trained biases, modules_to_save,
// per-module rank or alpha patterns, regex target_modules, fan_in_fan_out).
//
// Thread-safety: pure functions; a loaded LoraAdapter is immutable and shared.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "llm/decoder_config.h"
#include "llm/safetensors.h"

namespace inferd::llm {

enum class LoraModule { kQ, kK, kV, kO, kGate, kUp, kDown };
inline constexpr int kLoraModules = 7;
// "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj".
std::string_view LoraModuleName(LoraModule m);

struct LoraLimits {
  int32_t max_rank = 64;                        // the server's max_lora_rank
  uint64_t max_file_bytes = uint64_t{1} << 30;  // adapter_model.safetensors
};

struct LoraConfig {
  int32_t rank = 0;
  double alpha = 0;
  bool rslora = false;
  std::array<bool, kLoraModules> targets{};  // by LoraModule
  std::vector<int64_t> layers;               // layers_to_transform (empty: every layer)
  std::string base_model;                    // base_model_name_or_path, as given (informational)
  double scale() const;
};

// adapter_config.json: INVALID_ARGUMENT naming the field at fault,
// UNIMPLEMENTED naming a PEFT feature inferd does not apply.
Result<LoraConfig> ParseLoraConfig(std::string_view json, const LoraLimits& limits);

// One module's update in its serving form, FP32, row-major: `a` is A
// [rank, in] as stored; `b` is scale * B^T [rank, out] (B is stored [out,
// rank]), so the update of a row x is y += sum_j (a_j . x) b_j.
struct LoraPair {
  int64_t in = 0, out = 0;
  std::vector<float> a, b;
  bool empty() const { return a.empty(); }
};

struct LoraAdapter {
  LoraConfig config;
  std::vector<std::array<LoraPair, kLoraModules>> layers;  // [layer][module]; empty where not adapted
  int64_t bytes() const;                                   // of the FP32 matrices
};

// The tensors of an adapter's safetensors file against `base` (see above),
// read as FP32 (F32, F16 or BF16 stored), in the serving form (LoraPair).
Result<LoraAdapter> ReadLoraAdapter(const LoraConfig& config, const SafetensorsFile& weights,
                                    const DecoderConfig& base);

// A folder holding adapter_config.json and adapter_model.safetensors.
Result<std::shared_ptr<const LoraAdapter>> LoadLoraAdapter(const std::string& dir, const DecoderConfig& base,
                                                           const LoraLimits& limits);

}  // namespace inferd::llm
