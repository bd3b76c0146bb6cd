#include "scheduler/lora_cache.h"

#include <chrono>

namespace inferd {

LoraCache::LoraCache(LoraCacheOptions options, LoraLoader load, std::function<void()> on_finished)
    : options_(options), load_(std::move(load)), on_finished_(std::move(on_finished)) {
  loader_ = std::thread([this] { LoaderLoop(); });
}

LoraCache::~LoraCache() {
  {
    MutexLock l(&mu_);
    stopping_ = true;
  }
  cv_.NotifyAll();
  loader_.join();
}

std::shared_ptr<const llm::LoraAdapter> LoraCache::Get(const LoraEntry& entry) {
  auto it = resident_.find(entry.id);
  if (it != resident_.end()) {
    lru_.splice(lru_.end(), lru_, it->second.lru);
    return it->second.adapter;
  }
  if (loading_.insert(entry.id).second) {
    {
      MutexLock l(&mu_);
      queue_.push_back(entry);
    }
    cv_.NotifyOne();
  }
  return nullptr;
}

std::vector<LoraCache::Finished> LoraCache::TakeFinished() {
  std::vector<Finished> done;
  {
    MutexLock l(&mu_);
    done.swap(done_);
  }
  for (Finished& f : done) {
    loading_.erase(f.entry.id);
    if (!f.adapter.ok()) continue;
    const int64_t bytes = (*f.adapter)->bytes();
    if (bytes > options_.max_bytes) {
      f.adapter = Status::FailedPrecondition("LoRA adapter '" + f.entry.name + "' takes " + std::to_string(bytes) +
                                             " bytes, more than the model's lora_cache_bytes " +
                                             std::to_string(options_.max_bytes));
      continue;
    }
    Resident r{f.entry, *f.adapter, bytes, lru_.insert(lru_.end(), f.entry.id)};
    resident_.emplace(f.entry.id, std::move(r));
    bytes_ += bytes;
    f.evicted = EvictFor(f.entry.id);
  }
  return done;
}

// Least recently used first, skipping `keep` and adapters that sequences hold.
std::vector<std::string> LoraCache::EvictFor(uint64_t keep) {
  std::vector<std::string> evicted;
  auto over = [&] {
    return bytes_ > options_.max_bytes ||
           (options_.max_adapters > 0 && resident_.size() > static_cast<size_t>(options_.max_adapters));
  };
  for (auto it = lru_.begin(); it != lru_.end() && over();) {
    auto r = resident_.find(*it);
    if (*it == keep || r->second.adapter.use_count() > 1) {
      ++it;
      continue;
    }
    bytes_ -= r->second.bytes;
    evicted.push_back(r->second.entry.name);
    resident_.erase(r);
    it = lru_.erase(it);
  }
  return evicted;
}

void LoraCache::LoaderLoop() {
  while (true) {
    LoraEntry entry;
    {
      MutexLock l(&mu_);
      while (queue_.empty() && !stopping_) cv_.Wait(&mu_);
      if (stopping_) return;
      entry = std::move(queue_.front());
      queue_.pop_front();
    }
    const auto start = std::chrono::steady_clock::now();
    Result<std::shared_ptr<const llm::LoraAdapter>> adapter = load_(entry);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    {
      MutexLock l(&mu_);
      done_.push_back(Finished{std::move(entry), std::move(adapter), seconds, {}});
    }
    on_finished_();
  }
}

}  // namespace inferd
