// The decoder-only transformer over ATen (libtorch's tensor library): Llama
// (RMSNorm, rotary positions, grouped-query attention, SwiGLU; also Mistral
// and Qwen2's biases) and GPT-2 (LayerNorm, learned positions, GELU). Weights
// come from model.safetensors (FP32, FP16 or BF16; computed in FP32), shapes
// checked against config.json before use. The KV cache is paged
// (llm/decoder.h): one tensor of slots per layer for K and V.
//
// Thread-safety: a loaded decoder is used by one thread at a time (the
// generative scheduler's loop); its weights are shared read-only with other
// instances of the same model.
#pragma once

#include <memory>
#include <string>

#include "core/status.h"
#include "llm/decoder.h"

namespace inferd::llm {

struct DecoderWeights;  // aten_decoder.cc

struct WeightOptions {
  // Weight-only int8 (the model's `quantization: int8`): every projection
  // matrix as int8 blocks of 32 with a scale each (GGUF's Q8_0 layout, FP32
  // scales), multiplied in FP32 registers (decode_kernels.h); the FP32 copies
  // are released (a quarter of the bytes to hold and to read per token). The
  // embedding and norms stay FP32 (a tied lm_head is the embedding: FP32 for
  // the lookup, int8 for the logits). Llama only; a matrix whose width is not
  // a multiple of 32 stays FP32.
  bool int8 = false;
  // bfloat16 storage (`quantization: bf16`): the same matrices as int8 as
  // bf16 values, widened to FP32 in registers (half the bytes of FP32; no
  // scales, FP32's range, 8 bits of mantissa: closer to FP32 than int8).
  // Llama only; a matrix whose width is not a multiple of 16 stays FP32.
  bool bf16 = false;
};

// Reads and checks the weights of `dir` (model.safetensors, or the shards a
// model.safetensors.index.json names) for `config`.
Result<std::shared_ptr<const DecoderWeights>> LoadDecoderWeights(const std::string& dir, const DecoderConfig& config,
                                                                 const WeightOptions& options = {});

// A decoder over shared weights, with no cache until AllocateCache. Its
// intra-op threads are the calling thread's (set by the caller).
// `fast_decode`: a Llama step in which every sequence runs one token goes
// through decode_kernels.h on raw buffers (the matrix-vector products split
// between the threads); false: every step through ATen ops (the reference
// the tests compare it with).
std::unique_ptr<DecoderModel> MakeAtenDecoder(std::shared_ptr<const DecoderWeights> weights, bool fast_decode = true);

}  // namespace inferd::llm
