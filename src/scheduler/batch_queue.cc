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
  p.adaptive = spec.batching.adaptive;
  if (p.dynamic) p.padding = spec.batching.padding;
  for (const auto& in : spec.inputs) p.ragged.push_back(in.ragged);
  p.max_queue_size = spec.batching.queue.max_queue_size > 0 ? spec.batching.queue.max_queue_size
                                                            : std::max<size_t>(1, default_max_queue_size);
  return p;
}

BatchQueue::BatchQueue(BatchPolicy policy, CpuLoad* cpu) : policy_(std::move(policy)) {
  // One more level than configured: background requests (batch jobs) wait behind all others.
  const size_t levels = std::max<uint32_t>(1, policy_.priority_levels) + 1;
  normal_.resize(levels);
  delayed_.resize(levels);
  if (policy_.adaptive.enabled && policy_.dynamic) {
    adaptive_ =
        std::make_unique<AdaptiveBatching>(policy_.adaptive, policy_.max_batch_size, policy_.padding.has_value(), cpu);
  }
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
  if (policy_.padding) {
    const PaddedInput& first = policy_.padding->inputs.front();
    const auto& inputs = p->request->inputs;
    p->length = first.input < inputs.size() && first.axis < inputs[first.input].shape.size()
                    ? inputs[first.input].shape[first.axis]
                    : 0;
  }
  if (adaptive_) adaptive_->OnArrival(now, RateKey(p->length), p->rows);
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

bool BatchQueue::Compatible(const PendingRequest& a, const PendingRequest& b) const {
  const auto& x = a.request->inputs;
  const auto& y = b.request->inputs;
  if (x.size() != y.size()) return false;
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i].name != y[i].name || x[i].dtype != y[i].dtype) return false;
    if (i < policy_.ragged.size() && policy_.ragged[i]) continue;  // concatenated whatever their shapes
    if (x[i].shape.size() != y[i].shape.size()) return false;
    const PaddedInput* padded = policy_.padding ? policy_.padding->Find(i) : nullptr;
    for (size_t k = 1; k < x[i].shape.size(); ++k) {
      if (padded && k == padded->axis) continue;  // padded to a common length
      if (x[i].shape[k] != y[i].shape[k]) return false;
    }
  }
  return true;
}

int64_t BatchQueue::RateKey(int64_t length) const {
  return policy_.padding ? policy_.padding->RateKey(policy_.padding->Group(length)) : 0;
}

void BatchQueue::RecordExecution(int64_t rows, int64_t length, Duration took) {
  if (adaptive_) adaptive_->OnExecution(rows, length, took);
}

BatchQueue::Candidate BatchQueue::Prefix(const std::vector<Queue*>& order) const {
  Candidate c;
  const PendingRequest* head = order.front()->front().get();
  c.oldest = head->enqueued;
  const int64_t max_rows = policy_.max_batch_size;
  int64_t rows = 0;
  for (Queue* q : order) {
    for (size_t i = 0; i < q->size(); ++i) {
      const PendingRequest* p = (*q)[i].get();
      if ((p != head && !Compatible(*head, *p)) || (rows + p->rows > max_rows && !c.cumulative.empty())) {
        c.closed = true;
        return c;
      }
      rows += p->rows;
      c.picks.emplace_back(q, i);
      c.cumulative.push_back(rows);
      if (rows >= max_rows) {
        c.closed = true;
        return c;
      }
    }
  }
  return c;
}

std::vector<BatchQueue::Candidate> BatchQueue::Groups(const std::vector<Queue*>& order) const {
  const PaddingSpec& padding = *policy_.padding;
  const PendingRequest* head = order.front()->front().get();
  const int64_t max_rows = policy_.max_batch_size;
  const size_t scan = std::max<size_t>(64, 4 * static_cast<size_t>(max_rows));
  std::vector<Candidate> groups;  // in order of their first request: the head's first
  size_t seen = 0;
  for (Queue* q : order) {
    for (size_t i = 0; i < q->size() && seen < scan; ++i, ++seen) {
      const PendingRequest* p = (*q)[i].get();
      if (p != head && !Compatible(*head, *p)) continue;   // its turn comes when it leads the queue
      if (p != head && p->request->cancelled()) continue;  // answered when a decision reaches it
      const int64_t group = padding.Group(p->length);
      auto it = std::find_if(groups.begin(), groups.end(), [&](const Candidate& g) { return g.group == group; });
      if (it == groups.end()) {
        it = groups.insert(groups.end(), Candidate{});
        it->group = group;
        it->oldest = p->enqueued;
      }
      Candidate& g = *it;
      if (g.closed) continue;
      const int64_t rows = g.cumulative.empty() ? 0 : g.cumulative.back();
      if (rows + p->rows > max_rows && !g.cumulative.empty()) {
        g.closed = true;
        continue;
      }
      g.picks.emplace_back(q, i);
      g.cumulative.push_back(rows + p->rows);
      g.max_length = std::max(g.max_length, p->length);
      if (rows + p->rows >= max_rows) g.closed = true;
    }
  }
  return groups;
}

size_t BatchQueue::PreferredPrefix(const Candidate& c) const {
  const auto& preferred = policy_.preferred_batch_sizes;
  for (auto it = preferred.rbegin(); it != preferred.rend(); ++it) {
    auto pos = std::find(c.cumulative.begin(), c.cumulative.end(), static_cast<int64_t>(*it));
    if (pos != c.cumulative.end()) return static_cast<size_t>(pos - c.cumulative.begin()) + 1;
  }
  return c.cumulative.size();
}

void BatchQueue::Take(Candidate& c, size_t count, Decision* d) {
  int64_t max_length = 0;
  std::vector<std::pair<Queue*, size_t>> touched;  // each queue and one past its last pick
  for (size_t k = 0; k < count && k < c.picks.size(); ++k) {
    auto& [q, i] = c.picks[k];
    std::unique_ptr<PendingRequest>& slot = (*q)[i];
    max_length = std::max(max_length, slot->length);
    Forget(*slot);
    d->batch.push_back(std::move(slot));
    auto t = std::find_if(touched.begin(), touched.end(), [q = q](const auto& e) { return e.first == q; });
    if (t == touched.end())
      touched.emplace_back(q, i + 1);
    else
      t->second = std::max(t->second, i + 1);
  }
  // Close the gaps: only up to the last pick, near the front, so a decision
  // costs the batch's reach, not the queue's length.
  for (auto [q, end] : touched) {
    const auto stop = q->begin() + static_cast<std::ptrdiff_t>(end);
    q->erase(std::remove(q->begin(), stop, nullptr), stop);
  }
  d->padded_length = policy_.padding ? policy_.padding->PaddedLength(max_length) : 1;
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

  if (!policy_.dynamic) {
    Candidate one;
    one.picks.emplace_back(order.front(), 0);
    one.cumulative.push_back(order.front()->front()->rows);
    Take(one, 1, &d);
    return d;
  }

  std::vector<Candidate> groups;
  if (policy_.padding)
    groups = Groups(order);
  else
    groups.push_back(Prefix(order));
  Candidate& head = groups.front();
  const int64_t rows = head.cumulative.back();

  // Triton's rule: when a batch goes out, it is the largest prefix whose size
  // is a preferred size, if one can be formed; otherwise the whole prefix.
  const auto& preferred = policy_.preferred_batch_sizes;
  const bool fixed_now = !adaptive_ && policy_.max_queue_delay.count() == 0;
  if (head.closed || flush || fixed_now || (!preferred.empty() && rows >= preferred.back())) {
    Take(head, PreferredPrefix(head), &d);
    return d;
  }
  // The head's batch may wait; a full batch of another group need not.
  for (size_t g = 1; g < groups.size(); ++g) {
    if (groups[g].closed) {
      Take(groups[g], PreferredPrefix(groups[g]), &d);
      return d;
    }
  }
  TimePoint wake;
  if (adaptive_) {
    const int64_t length = policy_.padding ? policy_.padding->PaddedLength(head.max_length) : 1;
    std::optional<TimePoint> at = adaptive_->WaitUntil(
        now, head.oldest, policy_.padding ? policy_.padding->RateKey(head.group) : 0, rows, length);
    if (!at) {
      Take(head, PreferredPrefix(head), &d);
      return d;
    }
    wake = *at;
  } else {
    wake = head.oldest + policy_.max_queue_delay;
    if (now >= wake) {
      Take(head, PreferredPrefix(head), &d);
      return d;
    }
  }
  if (with_deadline_ > 0) {
    for (Queue* q : order)
      for (const auto& p : *q)
        if (p->deadline && *p->deadline < wake) wake = *p->deadline;
  }
  d.wake_at = wake;
  return d;
}

}  // namespace inferd
