// DecoderConfig: a decoder-only transformer's shape, from the Hugging Face
// `config.json` beside its weights. Two families: Llama (model_type llama,
// mistral, qwen2: RMSNorm, rotary positions, grouped-query attention, SwiGLU)
// and GPT-2 (model_type gpt2: LayerNorm, learned positions, GELU, Conv1D
// weights stored [in, out]).
//
// Thread-safety: plain values; ParseDecoderConfig is a pure function.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/datatype.h"
#include "core/status.h"

namespace inferd::llm {

enum class Architecture { kLlama, kGpt2 };

struct DecoderConfig {
  Architecture architecture = Architecture::kLlama;
  std::string model_type;  // as in config.json
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;  // == num_heads without grouped-query attention
  int64_t head_dim = 0;
  int64_t intermediate_size = 0;
  int64_t max_positions = 0;  // the longest context (prompt + output)
  double norm_eps = 1e-5;
  double rope_theta = 10000.0;  // Llama
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // q/k/v (and o for GPT-2) projections have biases
  bool mlp_bias = false;
  std::string hidden_act;  // "silu" (Llama), "gelu_new" | "gelu" | "gelu_pytorch_tanh" | "relu" (GPT-2)
  std::vector<int32_t> eos_token_ids;
  int32_t bos_token_id = -1;               // -1: none
  DataType torch_dtype = DataType::kFp32;  // the weights' dtype as declared (informational)
};

// Limits a config must stay within (a hostile config.json cannot ask for a
// terabyte of KV cache through its shape alone).
inline constexpr int64_t kMaxHiddenSize = 1 << 16;
inline constexpr int64_t kMaxLayers = 1024;
inline constexpr int64_t kMaxVocab = 1 << 22;
inline constexpr int64_t kMaxPositions = 1 << 20;

// INVALID_ARGUMENT naming the field at fault; UNIMPLEMENTED for a model_type
// or feature (rope_scaling) inferd does not run.
Result<DecoderConfig> ParseDecoderConfig(std::string_view json);

}  // namespace inferd::llm
