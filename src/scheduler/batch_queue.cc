#include "scheduler/batch_queue.h"

#include <algorithm>

namespace inferd {

BatchPolicy BatchPolicy::FromSpec(const ModelSpec& spec, size_t default_max_queue_size) {
  BatchPolicy p;
  p.max_batch_size = spec.max_batch_size;
  p.dynamic = spec.batching.dynamic && spec.max_batch_size > 0;
  p.preferred_batch_sizes = spec.batching.preferred_batch_sizes;
  p.max_queue_delay = std::chrono::microseconds(spec.batching.max_queue_delay_us);
  p.priority_levels = spec.batching.priority_levels;
  p.default_priority_level = spec.batching.default_priority_level;
  p.queue = spec.batching.queue;
  if (!spec.batching.dynamic) p.queue.allow_timeout_override = true;  // nothing to override: honour requests
  p.max_queue_size = spec.batching.queue.max_queue_size > 0 ? spec.batching.queue.max_queue_size
                                                            : std::max<size_t>(1, default_max_queue_size);
  return p;
}

BatchQueue::BatchQueue(BatchPolicy policy) : policy_(std::move(policy)) {
  // One more level than configured: background requests (batch jobs) wait behind all others.
  const size_t levels = std::max<uint32_t>(1, policy_.priority_levels) + 1;
  normal_.resize(levels);
  delayed_.resize(levels);
}

Status BatchQueue::Push(std::unique_ptr<PendingRequest>& p, TimePoint now) {
  if (size_ >= policy_.max_queue_size && may_purge_) {
    // Cancelled requests deep in the queue hold room until they come within
    // reach of a batch; a full queue looks for them, at most once between
    // decisions when it finds none (a scan of the whole queue).
    const size_t before = purged_.size();
    RemoveCancelled(&purged_, /*reach=*/0);
    may_purge_ = purged_.size() > before;
  }
  if (size_ >= policy_.max_queue_size) {
    return Status::Unavailable("model '" + p->request->model_name + "' queue is full (max_queue_size " +
                               std::to_string(policy_.max_queue_size) + ")");
  }
  uint32_t level = 0;
  if (p->request->background) {
    level = static_cast<uint32_t>(normal_.size() - 1);
  } else if (policy_.priority_levels > 0) {
    uint32_t prio = p->request->priority == 0 ? policy_.default_priority_level : p->request->priority;
    if (prio < 1 || prio > policy_.priority_levels) {
      return Status::InvalidArgument("priority " + std::to_string(p->request->priority) + " is out of range [1, " +
                                     std::to_string(policy_.priority_levels) + "]");
    }
    level = prio - 1;
  }
  uint64_t timeout_us = policy_.queue.default_timeout_us;
  const uint64_t asked = p->request->timeout_us;
  if (asked > 0 && policy_.queue.allow_timeout_override && (timeout_us == 0 || asked < timeout_us)) {
    timeout_us = asked;
  }
  p->level = level;
  p->enqueued = now;
  p->deadline.reset();
  if (timeout_us > 0) {
    p->deadline = now + std::chrono::microseconds(timeout_us);
    ++with_deadline_;
  }
  normal_[level].push_back(std::move(p));
  ++size_;
  return Status::OK();
}

void BatchQueue::Forget(const PendingRequest& p) {
  --size_;
  if (p.deadline) --with_deadline_;
}

void BatchQueue::RemoveCancelled(std::vector<std::unique_ptr<PendingRequest>>* out, int64_t reach) {
  int64_t live = 0;                             // rows (requests when not batching) of the live requests passed so far
  for (auto* queues : {&normal_, &delayed_}) {  // batch order, as Order()
    for (Queue& q : *queues) {
      for (auto it = q.begin(); it != q.end();) {
        if (reach > 0 && live >= reach) return;
        if ((*it)->request->cancelled()) {
          Forget(**it);
          out->push_back(std::move(*it));
          it = q.erase(it);
        } else {
          live += policy_.dynamic ? (*it)->rows : 1;
          ++it;
        }
      }
    }
  }
}

void BatchQueue::Expire(TimePoint now, Decision* d) {
  if (with_deadline_ == 0) return;
  for (size_t l = 0; l < normal_.size(); ++l) {
    Queue& q = normal_[l];
    for (auto it = q.begin(); it != q.end();) {
      if ((*it)->deadline && *(*it)->deadline <= now) {
        if (policy_.queue.delay_on_timeout) {
          --with_deadline_;
          (*it)->deadline.reset();
          delayed_[l].push_back(std::move(*it));
        } else {
          Forget(**it);
          // A cancelled request beyond a batch's reach is still answered as cancelled.
          ((*it)->request->cancelled() ? d->cancelled : d->expired).push_back(std::move(*it));
        }
        it = q.erase(it);
      } else {
        ++it;
      }
    }
  }
}

std::vector<BatchQueue::Queue*> BatchQueue::Order() {
  std::vector<Queue*> order;
  for (auto& q : normal_)
    if (!q.empty()) order.push_back(&q);
  for (auto& q : delayed_)
    if (!q.empty()) order.push_back(&q);
  return order;
}

bool BatchQueue::Compatible(const PendingRequest& a, const PendingRequest& b) {
  const auto& x = a.request->inputs;
  const auto& y = b.request->inputs;
  if (x.size() != y.size()) return false;
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i].name != y[i].name || x[i].dtype != y[i].dtype || x[i].shape.size() != y[i].shape.size()) return false;
    if (!std::equal(x[i].shape.begin() + 1, x[i].shape.end(), y[i].shape.begin() + 1)) return false;
  }
  return true;
}

BatchQueue::Decision BatchQueue::Next(TimePoint now, bool flush) {
  Decision d;
  d.cancelled = std::move(purged_);
  purged_.clear();
  may_purge_ = true;
  Expire(now, &d);  // first: it may move requests (DELAY) or take them from ahead (REJECT)
  // Only the requests a batch could take are checked: the work per decision
  // is bounded by max_batch_size, not by the queue length.
  RemoveCancelled(&d.cancelled, policy_.dynamic ? std::max(1, policy_.max_batch_size) : 1);
  if (size_ == 0) return d;
  std::vector<Queue*> order = Order();

  auto pop = [&](size_t count) {
    for (Queue* q : order) {
      while (count > 0 && !q->empty()) {
        Forget(*q->front());
        d.batch.push_back(std::move(q->front()));
        q->pop_front();
        --count;
      }
    }
  };

  if (!policy_.dynamic) {
    pop(1);
    return d;
  }

  // The longest compatible prefix that fits in max_batch_size.
  const PendingRequest* head = order.front()->front().get();
  const int64_t max_rows = policy_.max_batch_size;
  std::vector<int64_t> cumulative;  // rows after each request of the prefix
  int64_t rows = 0;
  bool closed = false;
  for (Queue* q : order) {
    for (const auto& p : *q) {
      if (p.get() != head && !Compatible(*head, *p))
        closed = true;
      else if (rows + p->rows > max_rows && !cumulative.empty())
        closed = true;
      if (closed) break;
      rows += p->rows;
      cumulative.push_back(rows);
      if (rows >= max_rows) closed = true;
      if (closed) break;
    }
    if (closed) break;
  }

  const auto& preferred = policy_.preferred_batch_sizes;
  auto largest_preferred_prefix = [&]() -> size_t {
    for (auto it = preferred.rbegin(); it != preferred.rend(); ++it) {
      auto pos = std::find(cumulative.begin(), cumulative.end(), static_cast<int64_t>(*it));
      if (pos != cumulative.end()) return static_cast<size_t>(pos - cumulative.begin()) + 1;
    }
    return cumulative.size();
  };

  // Triton's rule: when a batch goes out, it is the largest prefix whose size
  // is a preferred size, if one can be formed; otherwise the whole prefix.
  if (closed || flush || policy_.max_queue_delay.count() == 0) {
    pop(largest_preferred_prefix());
    return d;
  }
  if (!preferred.empty() && rows >= preferred.back()) {
    pop(largest_preferred_prefix());
    return d;
  }
  const TimePoint send_at = head->enqueued + policy_.max_queue_delay;
  if (now >= send_at) {
    pop(largest_preferred_prefix());
    return d;
  }
  TimePoint wake = send_at;
  if (with_deadline_ > 0) {
    for (Queue* q : order)
      for (const auto& p : *q)
        if (p->deadline && *p->deadline < wake) wake = *p->deadline;
  }
  d.wake_at = wake;
  return d;
}

}  // namespace inferd
