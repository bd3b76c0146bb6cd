// GenerativeStats: what a generative model version's scheduler records for
// the metrics endpoint, exported under vLLM's metric names (docs/generative.md)
// so dashboards built for vLLM read inferd unchanged.
//
// Thread-safety: every field is atomic, a lock-free Histogram or LoraStats; the
// scheduler's loop writes, scrapes read.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "metrics/histogram.h"
#include "metrics/lora_stats.h"

namespace inferd {

struct GenerativeStats {
  static std::vector<double> SecondsBuckets() {
    return {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25, 0.5,
            0.75,  1.0,   2.5,  5.0,  7.5,  10.0, 20.0, 40.0, 80.0};
  }
  Histogram time_to_first_token_s{SecondsBuckets()};
  Histogram inter_token_latency_s{SecondsBuckets()};  // between a request's consecutive tokens
  Histogram e2e_latency_s{SecondsBuckets()};
  std::atomic<uint64_t> prompt_tokens{0};      // prompt tokens of finished requests
  std::atomic<uint64_t> generation_tokens{0};  // tokens generated
  std::atomic<uint64_t> preemptions{0};
  std::atomic<uint64_t> prefix_queried_tokens{0};  // prompt tokens looked up in the prefix cache
  std::atomic<uint64_t> prefix_hit_tokens{0};      // of which found there
  std::atomic<int64_t> running{0}, waiting{0};
  std::atomic<double> kv_usage{0};  // fraction of KV blocks in use
  std::atomic<int64_t> kv_blocks{0};
  // Structured outputs (llm/structured_output.h): grammars compiled (cache
  // misses) and their compile time; token masks and the time spent on them.
  Histogram structured_compile_s{SecondsBuckets()};
  std::atomic<uint64_t> structured_requests{0};
  std::atomic<uint64_t> structured_cache_hits{0};
  std::atomic<uint64_t> structured_masks{0};
  std::atomic<uint64_t> structured_mask_ns{0};
  // Speculative decoding (scheduler/prompt_lookup.h): verification steps,
  // tokens drafted, and of which kept.
  std::atomic<uint64_t> spec_drafts{0};
  std::atomic<uint64_t> spec_draft_tokens{0};
  std::atomic<uint64_t> spec_accepted_tokens{0};
  LoraStats lora;  // LoRA adapters (metrics/lora_stats.h)
};

}  // namespace inferd
