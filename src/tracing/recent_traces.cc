#include "tracing/recent_traces.h"

namespace inferd::tracing {

bool RecentTraces::Claim(int64_t now_unix_ns) {
  if (capacity_ == 0) return false;
  const int64_t second = now_unix_ns / 1'000'000'000;
  int64_t seen = second_.load(std::memory_order_relaxed);
  if (seen == second && kept_.load(std::memory_order_relaxed) >= per_second_) return false;
  if (seen != second && second_.compare_exchange_strong(seen, second, std::memory_order_relaxed)) {
    kept_.store(0, std::memory_order_relaxed);
  }
  return kept_.fetch_add(1, std::memory_order_relaxed) < per_second_;
}

void RecentTraces::Keep(std::vector<SpanRecord> spans) {
  if (capacity_ == 0 || spans.empty()) return;
  MutexLock l(&mu_);
  if (ring_.size() >= capacity_) ring_.pop_front();
  ring_.push_back(std::move(spans));
}

std::vector<SpanRecord> RecentTraces::Snapshot(size_t max_requests) const {
  std::vector<SpanRecord> out;
  MutexLock l(&mu_);
  size_t n = 0;
  for (auto it = ring_.rbegin(); it != ring_.rend() && n < max_requests; ++it, ++n) {
    out.insert(out.end(), it->begin(), it->end());
  }
  return out;
}

}  // namespace inferd::tracing
