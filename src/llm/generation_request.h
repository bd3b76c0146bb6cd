// GenerationRequest: what a generative model is asked to do, read from an
// InferRequest, the form every front end produces (KServe's generate
// extension, the OpenAI routes, gRPC):
//   inputs      text_input (BYTES, one element: the prompt), or messages
//               (BYTES, one element: a JSON array of {"role", "content"}, for
//               the model's chat template), or input_ids (INT32/INT64 token ids)
//   parameters  max_tokens, min_tokens, temperature, top_k, top_p, min_p, seed,
//               presence_penalty, frequency_penalty, logprobs (top count),
//               stop (a string, or a JSON array of strings), stop_token_ids
//               (a JSON array of ids), ignore_eos, skip_special_tokens,
//               speculative_decoding (bool), lora_adapter (a string: the
//               LoRA adapter of the model to generate with), and the structured-output ones
//               (llm/structured_output.h)
// Unknown parameters are left alone (front ends add their own); a known
// one with the wrong type or range is an error naming it.
//
// Thread-safety: pure function; fuzzed in fuzz/fuzz_llm_files.cc.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/infer_request.h"
#include "core/status.h"
#include "llm/chat_template.h"
#include "llm/sampling.h"
#include "llm/structured_output.h"

namespace inferd::llm {

inline constexpr size_t kMaxStopStrings = 16;
inline constexpr size_t kMaxStopBytes = 256;
inline constexpr size_t kMaxMessages = 4096;

struct GenerationRequest {
  std::string prompt;                 // text_input
  std::vector<ChatMessage> messages;  // messages (empty when not a chat)
  std::vector<int32_t> prompt_ids;    // input_ids
  bool has_prompt_ids = false;
  SamplingParams sampling;
  std::optional<int64_t> max_tokens;  // none: up to the context length
  int64_t min_tokens = 0;
  std::vector<std::string> stop;
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  bool skip_special_tokens = true;
  std::optional<StructuredOutput> structured;  // response_format, guided_*, ... (llm/structured_output.h)
  std::optional<bool> speculative;             // speculative_decoding: on or off for this request (none: the model's)
  std::string lora_adapter;                    // empty: the base model
};

Result<GenerationRequest> ParseGenerationRequest(const InferRequest& request);

// A JSON array of {"role", "content"} (content a string, or an array of
// {"type": "text", "text"} parts) as chat messages.
Result<std::vector<ChatMessage>> ParseChatMessages(std::string_view json);

}  // namespace inferd::llm
