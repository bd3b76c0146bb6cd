#include "scheduler/prompt_lookup.h"

#include <algorithm>
#include <string>

#include "core/number_text.h"
#include "scheduler/spec_parameters.h"

namespace inferd {

Result<SpeculationOptions> SpeculationOptions::FromSpec(const ModelSpec& spec) {
  SpeculationOptions o;
  if (auto it = spec.parameters.find("speculative_decoding"); it != spec.parameters.end()) {
    if (it->second != "prompt_lookup" && it->second != "off") {
      return Status::InvalidArgument("parameter 'speculative_decoding' must be prompt_lookup or off");
    }
    o.enabled = it->second == "prompt_lookup";
  }
  INFERD_ASSIGN_OR_RETURN(const int64_t num_tokens_v,
                          IntParameter(spec, "num_speculative_tokens", 1, 32, o.num_tokens));
  o.num_tokens = static_cast<int32_t>(num_tokens_v);
  INFERD_ASSIGN_OR_RETURN(const int64_t ngram_max_v, IntParameter(spec, "prompt_lookup_max", 1, 16, o.ngram_max));
  o.ngram_max = static_cast<int32_t>(ngram_max_v);
  INFERD_ASSIGN_OR_RETURN(const int64_t ngram_min_v, IntParameter(spec, "prompt_lookup_min", 1, 16, o.ngram_min));
  o.ngram_min = static_cast<int32_t>(ngram_min_v);
  if (o.ngram_min > o.ngram_max) {
    return Status::InvalidArgument("parameter 'prompt_lookup_min' must not exceed 'prompt_lookup_max' (" +
                                   std::to_string(o.ngram_max) + ")");
  }
  INFERD_ASSIGN_OR_RETURN(const int64_t max_batch_v, IntParameter(spec, "speculative_max_batch", 1, 4096, o.max_batch));
  o.max_batch = static_cast<int32_t>(max_batch_v);
  if (auto it = spec.parameters.find("speculative_min_acceptance"); it != spec.parameters.end()) {
    bool is_int = false;
    int64_t i = 0;
    double v = 0;
    if (!ParseNumber(it->second, &is_int, &i, &v)) v = -1;
    if (is_int) v = static_cast<double>(i);
    if (!(v >= 0.0 && v <= 1.0)) {
      return Status::InvalidArgument("parameter 'speculative_min_acceptance' must be a number in [0, 1]");
    }
    o.min_acceptance = v;
  }
  return o;
}

void FindDraft(std::span<const int32_t> tokens, int32_t ngram_min, int32_t ngram_max, size_t max_tokens,
               std::vector<int32_t>* draft) {
  draft->clear();
  const size_t len = tokens.size();
  if (max_tokens == 0) return;
  for (size_t n = std::min<size_t>(static_cast<size_t>(ngram_max), len > 0 ? len - 1 : 0);
       n >= static_cast<size_t>(std::max(ngram_min, 1)); --n) {
    const std::span<const int32_t> suffix = tokens.subspan(len - n);
    // Latest first: start positions len - n - 1 down to 0 (the suffix itself excluded).
    for (size_t i = len - n; i-- > 0;) {
      if (tokens[i + n - 1] != suffix[n - 1] || !std::equal(suffix.begin(), suffix.end(), tokens.begin() + i)) continue;
      const size_t from = i + n, to = std::min(len, from + max_tokens);
      draft->assign(tokens.begin() + static_cast<std::ptrdiff_t>(from),
                    tokens.begin() + static_cast<std::ptrdiff_t>(to));
      return;
    }
  }
}

std::span<const int32_t> PromptLookup::Propose(std::span<const int32_t> tokens, size_t running, size_t room) {
  if (running > static_cast<size_t>(o_.max_batch) || room == 0) return {};
  if (pause_left_ > 0) {
    if (--pause_left_ == 0) rate_ = std::min(1.0, o_.min_acceptance + 0.2);  // a second chance, soon judged
    return {};
  }
  FindDraft(tokens, o_.ngram_min, o_.ngram_max, std::min(room, static_cast<size_t>(length_)), &draft_);
  return draft_;
}

void PromptLookup::Record(size_t drafted, size_t accepted) {
  if (drafted == 0) return;
  // The next draft's length: longer while drafts are kept whole, back to what was kept (+1) when one is cut.
  length_ = accepted == drafted ? std::min(o_.num_tokens, length_ + 2)
                                : std::max<int32_t>(1, static_cast<int32_t>(accepted) + 1);
  rate_ = 0.7 * rate_ + 0.3 * static_cast<double>(accepted) / static_cast<double>(drafted);
  if (rate_ >= o_.min_acceptance) {
    if (rate_ >= o_.min_acceptance + 0.2) next_pause_ = 16;  // paying again: the next pause is short
    return;
  }
  pause_left_ = next_pause_;
  next_pause_ = std::min(next_pause_ * 2, 512);
}

}  // namespace inferd
