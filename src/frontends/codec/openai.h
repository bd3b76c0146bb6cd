// The OpenAI-compatible API (PROTOCOLS.md): request bodies of
// POST /v1/completions and /v1/chat/completions into InferRequests for a
// generative model (llm/generation_request.h: text_input | messages |
// input_ids and sampling parameters), and the answers, stream chunks, model
// list and errors in OpenAI's JSON shapes.
//
// Accepted fields: model, prompt (a string, token ids, or a one-item list of
// either) | messages, max_tokens | max_completion_tokens, temperature, top_p,
// n (1-16), stream, stream_options.include_usage, stop, seed,
// presence_penalty, frequency_penalty, logprobs (chat: bool with
// top_logprobs 0-20; completions: 0-5), user; vLLM's top_k, min_p,
// min_tokens, ignore_eos, stop_token_ids, skip_special_tokens. Fields the
// server cannot honour (tools, echo, suffix, best_of > n, logit_bias,
// response_format other than text) are refused; unknown fields are ignored
// like OpenAI's own clients expect.
//
// Thread-safety: pure functions over bytes; fuzzed in fuzz/fuzz_openai.cc.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "core/infer_request.h"
#include "core/json_limits.h"
#include "core/status.h"

namespace inferd::openai {

enum class Endpoint { kCompletions, kChat };

inline constexpr int kMaxChoices = 16;

struct ParsedRequest {
  Endpoint endpoint = Endpoint::kChat;
  std::string model;
  int n = 1;
  bool stream = false;
  bool include_usage = false;
  bool logprobs = false;  // answer logprobs (chat: logprobs true; completions: logprobs set)
  // The request for choice 0; choice i is a copy with seed + i (when seeded).
  std::unique_ptr<InferRequest> request;
};

// INVALID_ARGUMENT with OpenAI-style messages ("'temperature' must be ...").
Result<ParsedRequest> ParseRequest(Endpoint endpoint, std::string_view body, const JsonLimits& limits = {});

// The request of choice `index` (a copy of parsed.request; its seed shifted).
std::unique_ptr<InferRequest> ChoiceRequest(const ParsedRequest& parsed, int index);

// One choice's result, as the generative scheduler answers.
struct Choice {
  std::string text;
  std::string finish_reason;  // "" while streaming
  std::string logprobs_json;  // the scheduler's `logprobs` output: [{token, logprob, bytes, top_logprobs}]
  int64_t prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0;
};

// Reads a scheduler answer (outputs text_output, logprobs; parameters).
Choice ChoiceFrom(const InferResponse& response);

struct Usage {
  int64_t prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0;
};

// {"id","object":"chat.completion"|"text_completion","created","model","choices":[...],"usage":{...}}
std::string EncodeResponse(Endpoint endpoint, const std::string& id, int64_t created, const std::string& model,
                           const std::vector<Choice>& choices, bool logprobs, const Usage& usage);

// One stream chunk for choice `index`: chat deltas carry `role` (first) and
// `content`; completions carry `text`. `finish_reason` empty = null.
// With include_usage, "usage": null is added (OpenAI's chunks carry it).
std::string EncodeChunk(Endpoint endpoint, const std::string& id, int64_t created, const std::string& model, int index,
                        bool first, const Choice& part, bool logprobs, bool include_usage);
// The last chunk with include_usage: "choices": [] and the usage.
std::string EncodeUsageChunk(Endpoint endpoint, const std::string& id, int64_t created, const std::string& model,
                             const Usage& usage);

// {"object":"list","data":[{"id","object":"model","created","owned_by":"inferd"}...]}
// GET /v1/models: a model card per id; a LoRA adapter's names its base model in "parent" (vLLM's form).
struct ModelCard {
  std::string id;
  std::string parent;  // empty: none (a base model)
};
std::string EncodeModelList(const std::vector<ModelCard>& models, int64_t created);

// {"error":{"message","type","param","code"}} for a status.
std::string EncodeError(const Status& status);
// The OpenAI error type of a status ("invalid_request_error", "not_found_error"...).
std::string_view ErrorType(const Status& status);

}  // namespace inferd::openai
