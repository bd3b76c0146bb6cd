// The generative mode of `inferd bench`: streams completions from an
// OpenAI-compatible server (inferd, vLLM) and measures what LLM serving is
// judged by: time to first token (TTFT), time per output token after the
// first (TPOT, per request), inter-token latency (ITL, between streamed
// chunks), end-to-end latency, output tokens/s, and goodput (requests per
// second that met the SLOs).
//
// Requests arrive as a Poisson process at --request-rate (or all at once when
// 0), each with prompt and output lengths drawn uniformly from mean +- spread
// (outputs are exact: ignore_eos with max_tokens). With `turns` > 1 a request
// is a conversation: each turn sends the history (earlier questions and the
// answers received) plus a new question, right after the previous answer;
// later turns' TTFT is reported apart (prefix caching shows there).
//
// Thread-safety: RunGenerativeLoad runs its own threads; call it from one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace inferd::bench {

struct GenerativeLoadOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8000;
  std::string model;
  bool chat = true;         // /v1/chat/completions, else /v1/completions
  double request_rate = 0;  // conversations per second (Poisson); 0: all at once
  int concurrency = 16;     // connections (requests in flight at most)
  int num_requests = 64;    // conversations
  int turns = 1;            // requests per conversation
  int prompt_words = 64, prompt_spread = 0;
  int output_tokens = 64, output_spread = 0;
  std::string system_prompt;                // shared by every conversation (chat)
  double slo_ttft_ms = 0, slo_tpot_ms = 0;  // goodput: 0 = no bound
  uint64_t seed = 1;
};

struct GenerativeReport {
  int requests = 0, failures = 0;
  std::string first_error;
  double duration_s = 0;
  int64_t input_tokens = 0, output_tokens = 0, cached_tokens = 0;
  std::vector<double> ttft_ms, later_ttft_ms, tpot_ms, itl_ms, e2e_ms;
  int good = 0;  // requests within the SLOs
  double output_tokens_per_s() const { return duration_s > 0 ? output_tokens / duration_s : 0; }
  double goodput() const { return duration_s > 0 ? good / duration_s : 0; }
};

Result<GenerativeReport> RunGenerativeLoad(const GenerativeLoadOptions& o);

// A table for people and a JSON object for scripts (percentiles p50/p90/p99).
std::string RenderGenerativeReport(const GenerativeReport& r, const std::string& label);
std::string GenerativeReportJson(const GenerativeReport& r, const std::string& label);

}  // namespace inferd::bench
