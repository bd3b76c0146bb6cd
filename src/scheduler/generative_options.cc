// GenerativeOptions::FromSpec: the generative scheduler's settings from a model's config parameters
// (scheduler/generative_scheduler.h says which).
#include "scheduler/generative_scheduler.h"
#include "scheduler/spec_parameters.h"

namespace inferd {

Result<GenerativeOptions> GenerativeOptions::FromSpec(const ModelSpec& spec, size_t default_max_queue) {
  GenerativeOptions o;
  INFERD_ASSIGN_OR_RETURN(int64_t bs, IntParameter(spec, "kv_block_size", 1, 1024, o.block_size));
  o.block_size = static_cast<int32_t>(bs);
  INFERD_ASSIGN_OR_RETURN(o.kv_cache_bytes,
                          IntParameter(spec, "kv_cache_bytes", 1, int64_t{1} << 44, o.kv_cache_bytes));
  INFERD_ASSIGN_OR_RETURN(int64_t seqs, IntParameter(spec, "max_num_seqs", 1, 4096, o.max_num_seqs));
  o.max_num_seqs = static_cast<int32_t>(seqs);
  INFERD_ASSIGN_OR_RETURN(int64_t tokens,
                          IntParameter(spec, "max_num_batched_tokens", 1, 1 << 20, o.max_batched_tokens));
  o.max_batched_tokens = static_cast<int32_t>(tokens);
  INFERD_ASSIGN_OR_RETURN(o.max_model_len, IntParameter(spec, "max_model_len", 0, int64_t{1} << 24, 0));
  INFERD_ASSIGN_OR_RETURN(int64_t threads, IntParameter(spec, "INTRA_OP_THREAD_COUNT", 1, 256, 1));
  o.intra_op_threads = static_cast<int>(threads);
  if (auto it = spec.parameters.find("enable_prefix_caching"); it != spec.parameters.end()) {
    if (it->second != "true" && it->second != "false") {
      return Status::InvalidArgument("parameter 'enable_prefix_caching' must be true or false");
    }
    o.prefix_caching = it->second == "true";
  }
  if (auto it = spec.parameters.find("scheduling"); it != spec.parameters.end()) {
    if (it->second != "continuous" && it->second != "static") {
      return Status::InvalidArgument("parameter 'scheduling' must be continuous or static");
    }
    o.static_batching = it->second == "static";
  }
  o.max_queue = spec.batching.queue.max_queue_size > 0 ? spec.batching.queue.max_queue_size : default_max_queue;
  INFERD_ASSIGN_OR_RETURN(o.speculation, SpeculationOptions::FromSpec(spec));
  INFERD_ASSIGN_OR_RETURN(int64_t loras, IntParameter(spec, "max_loras", 1, 1024, o.max_loras));
  o.max_loras = static_cast<int32_t>(loras);
  INFERD_ASSIGN_OR_RETURN(int64_t cpu_loras, IntParameter(spec, "max_cpu_loras", 0, 1 << 20, 0));
  o.lora_cache.max_adapters = static_cast<int32_t>(cpu_loras);
  INFERD_ASSIGN_OR_RETURN(o.lora_cache.max_bytes,
                          IntParameter(spec, "lora_cache_bytes", 1, int64_t{1} << 42, o.lora_cache.max_bytes));
  INFERD_ASSIGN_OR_RETURN(int64_t rank, IntParameter(spec, "max_lora_rank", 1, 1024, o.max_lora_rank));
  o.max_lora_rank = static_cast<int32_t>(rank);
  return o;
}

}  // namespace inferd
