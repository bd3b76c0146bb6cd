#include "tracing/recent_traces.h"

namespace inferd::tracing {

void RecentTraces::Offer(const std::vector<SpanRecord>& spans, int64_t now_unix_ns) {
  if (capacity_ == 0 || spans.empty()) return;
  const int64_t second = now_unix_ns / 1'000'000'000;
  int64_t seen = second_.load(std::memory_order_relaxed);
  if (seen != second && second_.compare_exchange_strong(seen, second, std::memory_order_relaxed)) {
    kept_.store(0, std::memory_order_relaxed);
  }
  if (kept_.fetch_add(1, std::memory_order_relaxed) >= per_second_) return;
  std::vector<SpanRecord> copy = spans;
  MutexLock l(&mu_);
  if (ring_.size() >= capacity_) ring_.pop_front();
  ring_.push_back(std::move(copy));
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
