// LoraCache: one generative model's LoRA adapters in host memory. An adapter
// is read from its folder (LoraCatalog's entry) on first use by the cache's
// loader thread -- never on the scheduler's loop, so requests of other
// adapters and of the base model go on meanwhile -- and kept under a byte
// budget (and an optional count), least recently used evicted first. An
// adapter that running or waiting sequences hold (a shared_ptr besides the
// cache's) is not evicted; its memory is freed when the last one lets go.
//
// Thread-safety: Get and TakeFinished are called by one thread (the
// scheduler's loop); the loader thread only reads entries and hands back
// results under the mutex. `on_finished` runs on the loader thread after each
// load (the scheduler wakes its loop).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <set>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/mutex.h"
#include "core/status.h"
#include "llm/lora_adapter.h"
#include "scheduler/lora_catalog.h"

namespace inferd {

struct LoraCacheOptions {
  int64_t max_bytes = int64_t{1} << 30;  // lora_cache_bytes: adapters' FP32 matrices held
  int32_t max_adapters = 0;              // max_cpu_loras: adapters held (0: the bytes decide)
};

using LoraLoader = std::function<Result<std::shared_ptr<const llm::LoraAdapter>>(const LoraEntry&)>;

class LoraCache {
 public:
  LoraCache(LoraCacheOptions options, LoraLoader load, std::function<void()> on_finished);
  ~LoraCache();  // a load in progress finishes; queued ones are dropped
  LoraCache(const LoraCache&) = delete;
  LoraCache& operator=(const LoraCache&) = delete;

  // The adapter when it is resident (now the most recently used); else its
  // load is queued (once per entry id) and null is returned.
  std::shared_ptr<const llm::LoraAdapter> Get(const LoraEntry& entry);

  struct Finished {
    LoraEntry entry;
    Result<std::shared_ptr<const llm::LoraAdapter>> adapter;  // the failure says why (the file, the limits)
    double seconds = 0;                                       // the load's time
    std::vector<std::string> evicted;                         // adapters evicted to make room for it
  };
  // The loads finished since the last call, each once; successful ones are
  // resident now (FAILED_PRECONDITION for one larger than the whole budget).
  std::vector<Finished> TakeFinished();

  int64_t bytes() const { return bytes_; }
  size_t resident() const { return resident_.size(); }

 private:
  struct Resident {
    LoraEntry entry;
    std::shared_ptr<const llm::LoraAdapter> adapter;
    int64_t bytes = 0;
    std::list<uint64_t>::iterator lru;
  };
  void LoaderLoop();
  std::vector<std::string> EvictFor(uint64_t keep);

  const LoraCacheOptions options_;
  const LoraLoader load_;
  const std::function<void()> on_finished_;
  // The loop thread's.
  std::unordered_map<uint64_t, Resident> resident_;
  std::list<uint64_t> lru_;  // front: least recently used
  std::set<uint64_t> loading_;
  int64_t bytes_ = 0;

  Mutex mu_;
  CondVar cv_;
  std::deque<LoraEntry> queue_ TSA_GUARDED_BY(mu_);
  std::vector<Finished> done_ TSA_GUARDED_BY(mu_);
  bool stopping_ TSA_GUARDED_BY(mu_) = false;
  std::thread loader_;
};

}  // namespace inferd
