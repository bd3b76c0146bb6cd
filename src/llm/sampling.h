// Sampling the next token from a decoder's logits: greedy (temperature 0),
// temperature, top-k, top-p (nucleus), min-p, presence and frequency
// penalties over the tokens generated so far (OpenAI's definitions), a seed
// for reproducible draws, and log-probabilities of the model's own
// distribution (before penalties and temperature, as vLLM reports them).
//
// Thread-safety: SamplingParams are values; a Sampler is used by one thread.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/status.h"

namespace inferd::llm {

struct SamplingParams {
  double temperature = 1.0;  // 0: greedy
  int32_t top_k = 0;         // 0: all tokens
  double top_p = 1.0;
  double min_p = 0.0;
  double presence_penalty = 0.0;
  double frequency_penalty = 0.0;
  std::optional<uint64_t> seed;
  int32_t logprobs = -1;  // -1: none; k >= 0: the chosen token's and the k most likely

  // INVALID_ARGUMENT naming the field (OpenAI's ranges; top_k and min_p as vLLM's).
  Status Validate() const;
};

inline constexpr int32_t kMaxTopLogprobs = 20;

struct SampledToken {
  int32_t token = 0;
  float logprob = 0;                           // when logprobs >= 0
  std::vector<std::pair<int32_t, float>> top;  // the k most likely, most likely first
};

class Sampler {
 public:
  // `seed`: the request's, or one drawn from the system when it has none.
  explicit Sampler(std::optional<uint64_t> seed);

  // `logits` is scratch (modified). `generated`: counts of the tokens the
  // request generated so far (for the penalties).
  SampledToken Sample(std::span<float> logits, const SamplingParams& p,
                      const std::unordered_map<int32_t, int32_t>& generated);

 private:
  std::mt19937_64 rng_;
  std::vector<int32_t> order_;  // scratch
  std::vector<float> probs_;    // scratch
};

}  // namespace inferd::llm
