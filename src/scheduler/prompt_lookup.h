// Prompt-lookup speculative decoding: drafts from the sequence itself, no
// draft model. The last few tokens (an n-gram of ngram_max down to
// ngram_min tokens) are looked up in the prompt and the output so far; the
// tokens that followed their latest earlier occurrence are the draft. The
// scheduler runs the sequence's next token and the draft in one step, with
// logits for every position, and keeps the draft's longest prefix that the
// model's own sampling reproduces (plus the token sampled after it): the
// output is what plain decoding would give, token for token, for greedy and
// sampled requests alike (sampling from p and accepting a point-mass draft d
// when the sample equals d is the rejection rule of speculative sampling).
// Text that repeats its prompt (summaries, edits, extraction, code) gets
// several tokens per step for the weights read once.
//
// It pays only where drafts are accepted and a step's extra rows are cheap
// (a memory-bound step: few sequences), so it holds back where they are
// not: drafts start at half of num_tokens, grow by 2 while they are kept
// whole and shrink to what was kept (+1) when one is cut; no drafts while
// more than max_batch sequences run; and a sequence whose recent acceptance
// falls below min_acceptance stops drafting for a while (16 steps, doubling
// while it stays low, at most 512).
//
// Thread-safety: SpeculationOptions is a value; PromptLookup is one
// sequence's state, used by the scheduler's loop only.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "core/model_spec.h"
#include "core/status.h"

namespace inferd {

struct SpeculationOptions {
  bool enabled = false;    // the model's default (a request may turn it on or off)
  int32_t num_tokens = 4;  // drafted tokens per step at most
  int32_t ngram_max = 3;   // the longest suffix looked up
  int32_t ngram_min = 1;   // the shortest
  int32_t max_batch = 4;   // no drafts while more sequences run
  double min_acceptance = 0.3;

  // From the config's parameters: speculative_decoding (prompt_lookup | off),
  // num_speculative_tokens, prompt_lookup_max, prompt_lookup_min,
  // speculative_max_batch, speculative_min_acceptance; INVALID_ARGUMENT naming a bad one.
  static Result<SpeculationOptions> FromSpec(const ModelSpec& spec);
};

// The tokens that followed the latest earlier occurrence of the longest
// suffix of `tokens` of ngram_max .. ngram_min tokens, at most `max_tokens`
// of them, into `draft` (cleared; empty when no suffix recurs).
void FindDraft(std::span<const int32_t> tokens, int32_t ngram_min, int32_t ngram_max, size_t max_tokens,
               std::vector<int32_t>* draft);

class PromptLookup {
 public:
  explicit PromptLookup(const SpeculationOptions& options)
      : o_(options), length_(std::max<int32_t>(1, (options.num_tokens + 1) / 2)) {}

  // The draft for the next step of a sequence whose tokens are `tokens`
  // (prompt and output), `running` sequences in the batch, at most `room`
  // tokens: empty when speculation does not pay now.
  std::span<const int32_t> Propose(std::span<const int32_t> tokens, size_t running, size_t room);
  // How the last proposal went: `accepted` of its `drafted` tokens kept.
  void Record(size_t drafted, size_t accepted);

  bool paused() const { return pause_left_ > 0; }

 private:
  const SpeculationOptions& o_;
  std::vector<int32_t> draft_;
  int32_t length_;           // the next draft's length at most
  double rate_ = 0.5;        // recent acceptance, a moving average over drafts (cautious at first)
  int32_t pause_left_ = 0;   // steps without drafts left
  int32_t next_pause_ = 16;  // the next pause's length
};

}  // namespace inferd
