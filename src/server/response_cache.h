// ResponseCache: successful answers kept by request, LRU within a byte budget
// (Triton's response cache, `response_cache { enable: true }` per model).
//
// The key is exact: model, version, every input's name, datatype, shape and
// bytes, the requested outputs with their parameters (binary, classification)
// -- Triton hashes names and bytes only. The whole key is stored and compared,
// not just its hash, so a crafted request can never be answered from (or
// poison) another request's entry. A version is part of the key, so a swap or
// a rollback never serves an answer of another version.
//
// Thread-safety: all methods are thread-safe (one mutex; lookups copy a
// shared_ptr out, never the tensors).
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <unordered_map>

#include "core/infer_request.h"
#include "core/mutex.h"

namespace inferd {

// The exact cache key of a routed, validated request (its model_version set).
// `snapshot` and `loaded_ns` (the loaded version's address and load time) tell
// two loads of the same version number apart: a version whose files changed
// and reloaded must not answer from the old one's entries.
std::string ResponseCacheKey(const InferRequest& request, uint64_t snapshot = 0, uint64_t loaded_ns = 0);

struct ResponseCacheStats {
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t evictions = 0;
  uint64_t inserts = 0;
  uint64_t entries = 0;
  uint64_t bytes = 0;  // keys + output bytes held
};

class ResponseCache {
 public:
  explicit ResponseCache(uint64_t capacity_bytes) : capacity_(capacity_bytes) {}

  uint64_t capacity() const { return capacity_; }

  // The cached answer for `key`, or null (counted as a hit or a miss).
  std::shared_ptr<const InferResponse> Lookup(const std::string& key);
  // Keeps `response` (outputs copied into one owned buffer, so the entry
  // holds no view into a request body or a backend's memory). An answer
  // larger than the whole budget is not kept.
  void Insert(std::string key, const InferResponse& response);
  // Drops every entry of `model` (all versions; unload, explicit eviction).
  void EraseModel(const std::string& model);

  ResponseCacheStats Stats() const;

 private:
  struct Entry {
    std::string key;
    std::string model;
    std::shared_ptr<const InferResponse> response;
    uint64_t bytes = 0;
  };
  using Lru = std::list<Entry>;

  void EvictTo(uint64_t budget) TSA_REQUIRES(mu_);
  void Erase(Lru::iterator it) TSA_REQUIRES(mu_);

  const uint64_t capacity_;
  mutable Mutex mu_;
  Lru lru_ TSA_GUARDED_BY(mu_);                                                    // front = most recently used
  std::unordered_map<std::string_view, Lru::iterator> index_ TSA_GUARDED_BY(mu_);  // views into Entry::key
  ResponseCacheStats stats_ TSA_GUARDED_BY(mu_);
};

}  // namespace inferd
