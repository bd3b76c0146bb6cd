// RecentTraces: the last traced requests, kept in memory for the web
// console's traces page (docs/console.md): each one's spans, as the request
// recorded them. A bounded ring (`capacity` requests; the oldest goes) that
// keeps at most `per_second` requests in each second, so that tracing every
// request copies only a few of them (the others go to the exporter alone).
//
// Thread-safety: thread-safe (Offer from the request path, Snapshot from the
// console's handler).
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <vector>

#include "core/mutex.h"
#include "core/trace.h"

namespace inferd::tracing {

class RecentTraces {
 public:
  // capacity 0: keeps nothing.
  RecentTraces(size_t capacity, uint32_t per_second) : capacity_(capacity), per_second_(per_second) {}

  // Whether a request traced at `now_unix_ns` is to be kept: true for the
  // first `per_second` in each second (the common case when every request
  // is traced, false, costs two atomic loads).
  bool Claim(int64_t now_unix_ns);
  // A claimed request's spans.
  void Keep(std::vector<SpanRecord> spans);
  // The spans of the newest `max_requests` requests, newest request first.
  std::vector<SpanRecord> Snapshot(size_t max_requests) const;
  size_t capacity() const { return capacity_; }

 private:
  const size_t capacity_;
  const uint32_t per_second_;
  // This second's share, checked before the lock.
  std::atomic<int64_t> second_{-1};
  std::atomic<uint32_t> kept_{0};
  mutable Mutex mu_;
  std::deque<std::vector<SpanRecord>> ring_ TSA_GUARDED_BY(mu_);  // oldest first
};

}  // namespace inferd::tracing
