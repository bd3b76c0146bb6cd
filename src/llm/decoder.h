// DecoderModel: what the generative scheduler drives (a decoder-only
// transformer with a paged KV cache), free of any framework's headers. The
// llm backend (backends/llm/) implements it over ATen; tests fake it.
//
// The KV cache is `num_blocks` blocks of `block_size` positions for every
// layer. The scheduler owns the bookkeeping (llm/block_pool.h): which blocks
// a sequence's positions live in (its block table); the model only reads and
// writes the slots the tables name.
//
// Thread-safety: not thread-safe; one thread (the scheduler's loop) calls it.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"
#include "llm/decoder_config.h"

namespace inferd::llm {

struct LoraAdapter;  // llm/lora_adapter.h

// One sequence's part of a forward step.
struct StepInput {
  std::span<const int32_t> tokens;  // tokens to run, at positions [position, position + tokens.size())
  int64_t position = 0;             // positions before these are already in the cache
  std::span<const int32_t> blocks;  // cache blocks of positions [0, position + tokens.size()), in order
  // Logits wanted for the last `num_logits` tokens: 1 for a decode step or a
  // prompt's last chunk, 0 for a prefill chunk, tokens.size() for a
  // speculative step's verification (every drafted position).
  int32_t num_logits = 1;
  // The sequence's LoRA adapter (null: the base model): its low-rank updates
  // are added to the projections it targets, for this sequence's rows only.
  // Read against this model's config (llm/lora_adapter.h); not owned, alive
  // for the call.
  const LoraAdapter* lora = nullptr;
};

class DecoderModel {
 public:
  virtual ~DecoderModel() = default;
  virtual const DecoderConfig& config() const = 0;
  // Bytes of cache one block of `block_size` positions takes (all layers, K and V).
  virtual int64_t CacheBytesPerBlock(int64_t block_size) const = 0;
  // (Re)allocates the cache; its contents are undefined until written.
  virtual Status AllocateCache(int64_t num_blocks, int64_t block_size) = 0;
  // Runs the tokens of every sequence in one pass, writing their keys and
  // values into the cache (a token attends to its sequence's positions up to
  // its own), and returns config().vocab_size logits for each of the last
  // num_logits tokens of every sequence, in batch and position order, back
  // to back in `logits`. INVALID_ARGUMENT for a token outside the
  // vocabulary, num_logits outside [0, tokens], a block table that does
  // not cover the positions, or an adapter whose layers do not match.
  virtual Status Forward(std::span<const StepInput> batch, std::vector<float>* logits) = 0;
};

}  // namespace inferd::llm
