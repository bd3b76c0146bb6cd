// GenerativeScheduler: the scheduler kind "generative" (backend.h contract
// 13). Iteration-level (continuous) batching over one GenerativeInstance:
// every step runs the decode token of each running sequence plus chunks of
// waiting prompts, up to a token budget, so new requests join at the next
// step and finished ones leave at once. The KV cache is paged under a byte
// budget (llm/block_pool.h) with prefix caching; when it is full the most
// recently admitted sequence is preempted (its blocks freed, recomputed when
// it runs again, ahead of new arrivals). A request whose client has gone
// (cancellation, or a stream that refuses a part) leaves at the next step and
// frees its blocks.
//
// Requests are InferRequests read by llm::ParseGenerationRequest; answers
// carry `text_output` (BYTES: in a stream, each part's new text), `logprobs`
// (BYTES, JSON, when asked) and the parameters finish_reason ("stop" |
// "length"), prompt_tokens, completion_tokens, cached_tokens.
//
// Static batching (`static_batching`) is the baseline the benchmark compares
// against: a batch forms only when none runs, and runs to completion.
//
// Thread-safety: thread-safe. One loop thread runs the model; Enqueue
// tokenizes on the caller's thread.
#pragma once

#include <atomic>
#include <deque>
#include <memory>
#include <thread>

#include "backends/generative.h"
#include "core/clock.h"
#include "core/model_spec.h"
#include "core/mutex.h"
#include "metrics/generative_stats.h"
#include "metrics/model_stats.h"
#include "scheduler/lora_cache.h"
#include "scheduler/lora_catalog.h"
#include "scheduler/prompt_lookup.h"
#include "scheduler/scheduler.h"

namespace inferd {

struct GenerativeOptions {
  int32_t block_size = 16;               // positions per KV block
  int64_t kv_cache_bytes = 256ll << 20;  // the KV cache budget
  int32_t max_num_seqs = 64;             // sequences running at once
  int32_t max_batched_tokens = 512;      // tokens per step (decode tokens + prefill chunks)
  int64_t max_model_len = 0;             // 0: the model's context length
  bool prefix_caching = true;
  bool static_batching = false;
  size_t max_queue = 1024;  // waiting requests before UNAVAILABLE
  int intra_op_threads = 1;
  SpeculationOptions speculation;  // prompt-lookup speculative decoding (scheduler/prompt_lookup.h)
  // LoRA adapters (Llama models): distinct adapters in one step, the host
  // memory that holds them (scheduler/lora_cache.h), the largest rank read.
  int32_t max_loras = 16;
  LoraCacheOptions lora_cache;
  int32_t max_lora_rank = 64;
  LoraLoader lora_loader;  // null: llm::LoadLoraAdapter from the entry's folder (tests give a fake)

  // From the config's parameters (kv_cache_bytes, kv_block_size, max_num_seqs,
  // max_num_batched_tokens, max_model_len, enable_prefix_caching, scheduling:
  // continuous | static, INTRA_OP_THREAD_COUNT, max_loras, max_cpu_loras,
  // lora_cache_bytes, max_lora_rank, and speculation's:
  // SpeculationOptions::FromSpec); INVALID_ARGUMENT naming a bad one.
  static Result<GenerativeOptions> FromSpec(const ModelSpec& spec, size_t default_max_queue);
};

class GenerativeScheduler final : public Scheduler {
 public:
  // `instance` must be a GenerativeInstance. `spec` outlives the scheduler;
  // so does `loras` (may be null: no adapters), which says where the adapters
  // a request names (parameter lora_adapter) are.
  static Result<std::unique_ptr<GenerativeScheduler>> Create(GenerativeOptions options, const ModelSpec& spec,
                                                             std::unique_ptr<ModelInstance> instance, Clock* clock,
                                                             std::shared_ptr<ModelStats> stats,
                                                             const LoraCatalog* loras = nullptr);
  ~GenerativeScheduler() override;

  Status Enqueue(std::unique_ptr<PendingRequest>& pending) override;
  Status WaitReady() override { return Status::OK(); }
  size_t QueueSize() const override;
  Status Admission() const override;
  uint64_t HeldBytes() const override;  // the LoRA adapters in host memory
  void Shutdown() override;

  // What the scheduler records (also exported through ModelStats::generative()).
  const GenerativeStats& counters() const { return *gstats_; }
  int32_t num_blocks() const { return num_blocks_; }

  struct Sequence;  // generative_scheduler.cc

 private:
  GenerativeScheduler(GenerativeOptions options, const ModelSpec& spec, std::unique_ptr<ModelInstance> instance,
                      Clock* clock, std::shared_ptr<ModelStats> stats, const LoraCatalog* loras);
  void Loop();
  // The prompt rendered (chat template) and tokenised, the context checked: on the loop thread.
  Status Tokenize(Sequence& seq) const;

  GenerativeOptions options_;
  const ModelSpec& spec_;
  std::unique_ptr<ModelInstance> instance_;
  GenerativeInstance* model_;  // instance_, as what it is
  Clock* clock_;
  std::shared_ptr<ModelStats> stats_;
  int64_t max_model_len_ = 0;
  int32_t num_blocks_ = 0;
  std::unique_ptr<GenerativeStats> own_stats_;  // when no ModelStats was given
  GenerativeStats* gstats_;

  mutable Mutex mu_;
  CondVar cv_;
  std::deque<std::unique_ptr<Sequence>> incoming_ TSA_GUARDED_BY(mu_);
  bool stopping_ TSA_GUARDED_BY(mu_) = false;
  bool lora_loaded_ TSA_GUARDED_BY(mu_) = false;  // the adapter cache finished a load
  std::atomic<size_t> queued_{0};
  const LoraCatalog* loras_;
  std::unique_ptr<LoraCache> lora_cache_;  // Llama models with a catalog; destroyed before mu_
  std::thread loop_;
};

struct SchedulerContext;
Result<std::unique_ptr<Scheduler>> MakeGenerativeScheduler(SchedulerContext context);

}  // namespace inferd
