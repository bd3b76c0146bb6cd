// GenerativeScheduler::Sequence: one request's state on its way through
// generation (generative_scheduler.cc's loop and stepper own it; private to
// the scheduler's files).
//
// Thread-safety: a Sequence belongs to the caller of Enqueue until it is
// queued, then to the loop thread.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "llm/generation_request.h"
#include "llm/sampling.h"
#include "llm/stop_matcher.h"
#include "llm/tokenizer.h"
#include "scheduler/generative_scheduler.h"
#include "scheduler/pending_request.h"
#include "scheduler/structured_decoding.h"

namespace inferd {

// One request on its way through generation.
struct GenerativeScheduler::Sequence {
  std::unique_ptr<PendingRequest> pending;
  llm::GenerationRequest gen;
  std::vector<int32_t> tokens;  // prompt, then generated
  size_t prompt_len = 0;
  size_t computed = 0;           // tokens whose keys and values are in the cache
  std::vector<int32_t> end_ids;  // tokens that end this request's generation
  std::vector<int32_t> blocks;
  size_t registered = 0;  // leading full blocks registered in the prefix cache
  int64_t max_tokens = 0;
  size_t generated = 0;
  size_t cached_tokens = 0;  // prompt tokens found in the prefix cache at first admission
  bool admitted_once = false;
  TimePoint admitted{};  // first admission (traced requests' queue and prefill spans)
  int64_t preemptions = 0;
  std::unique_ptr<llm::Sampler> sampler;
  std::unordered_map<int32_t, int32_t> counts;
  std::unique_ptr<llm::IncrementalDecoder> detok;
  std::unique_ptr<llm::StopMatcher> stop;
  std::string text;      // everything sent or to send (non-streaming answers)
  std::string logprobs;  // JSON objects of this part's tokens, comma-separated
  std::string all_logprobs;
  TimePoint first_token{};
  TimePoint last_token{};
  bool streaming = false;
  bool finished = false;
  std::string finish_reason;
  Status error;                                  // why, when finish_reason is "error"
  std::unique_ptr<SequenceGrammar> grammar;      // a structured output's position
  std::unique_ptr<PromptLookup> lookup;          // speculative decoding's drafts, when on
  std::vector<int32_t> verify;                   // a speculative step's tokens: the next one, then the draft
  std::optional<LoraEntry> lora_entry;           // the LoRA adapter asked for (lora_adapter)
  std::shared_ptr<const llm::LoraAdapter> lora;  // it, once in host memory
  uint64_t prefix_salt = 0;                      // prefix-cache key of what computes the KV (0: the base model)
};

}  // namespace inferd
