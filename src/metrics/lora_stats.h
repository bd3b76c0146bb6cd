// LoraStats: a generative model's LoRA adapters for the metrics endpoint --
// per adapter: requests, prompt and generated tokens, loads and evictions;
// the adapters its scheduler runs and those waiting (vLLM's
// vllm:lora_requests_info, which Kubernetes' inference gateway reads for
// LoRA affinity); the host memory the adapters take and how long loads take.
//
// Thread-safety: thread-safe (a mutex: written once per request or load by
// the scheduler's loop, read by scrapes).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/mutex.h"
#include "metrics/histogram.h"

namespace inferd {

class LoraStats {
 public:
  struct Adapter {
    uint64_t requests = 0;
    uint64_t prompt_tokens = 0;
    uint64_t generation_tokens = 0;
    uint64_t loads = 0;
    uint64_t load_failures = 0;
    uint64_t evictions = 0;
  };
  struct Snapshot {
    std::map<std::string, Adapter> adapters;
    std::vector<std::string> running, waiting;  // adapters of running / waiting sequences
    int32_t max_loras = 0;
    int64_t resident = 0, bytes = 0;  // adapters in host memory and their bytes
    double updated_s = 0;             // when running/waiting last changed (Unix seconds)
  };

  void Configure(int32_t max_loras, double now_s) {
    MutexLock l(&mu_);
    s_.max_loras = max_loras;
    s_.updated_s = now_s;
  }
  void AddRequest(const std::string& name, uint64_t prompt_tokens, uint64_t generation_tokens) {
    MutexLock l(&mu_);
    Adapter& a = s_.adapters[name];
    ++a.requests;
    a.prompt_tokens += prompt_tokens;
    a.generation_tokens += generation_tokens;
  }
  void AddLoad(const std::string& name, bool ok, double seconds) {
    load_seconds.Observe(seconds);
    MutexLock l(&mu_);
    Adapter& a = s_.adapters[name];
    ++(ok ? a.loads : a.load_failures);
  }
  void AddEviction(const std::string& name) {
    MutexLock l(&mu_);
    ++s_.adapters[name].evictions;
  }
  // Only when something changed (the gauge's value is the time of the change).
  void SetActive(std::vector<std::string> running, std::vector<std::string> waiting, int64_t resident, int64_t bytes,
                 double now_s) {
    MutexLock l(&mu_);
    if (running != s_.running || waiting != s_.waiting) s_.updated_s = now_s;
    s_.running = std::move(running);
    s_.waiting = std::move(waiting);
    s_.resident = resident;
    s_.bytes = bytes;
    held_bytes.store(bytes, std::memory_order_relaxed);
  }
  Snapshot snapshot() const {
    MutexLock l(&mu_);
    return s_;
  }

  std::atomic<int64_t> held_bytes{0};  // the adapters' bytes, readable without the mutex (the memory budget)
  Histogram load_seconds{
      {0.0005, 0.001, 0.002, 0.003, 0.004, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5}};

 private:
  mutable Mutex mu_;
  Snapshot s_ TSA_GUARDED_BY(mu_);
};

}  // namespace inferd
