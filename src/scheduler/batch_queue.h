// BatchQueue: the dynamic-batching policy, without threads.
//
// Given the queued requests and the current time, Next() decides what to run
// now (a batch), what to fail (requests whose queue timeout passed) and when
// to look again. All time comes from the caller, so tests drive it with a
// fake clock and no sleeps.
//
// PARAMETERS AND BEHAVIOR
//  * max_batch_size 0, or no dynamic_batching: every request runs alone, in
//    priority then arrival order.
//  * Background requests (InferRequest::background: batch jobs) form a level
//    below the lowest priority level.
//  * dynamic batching: a batch is a prefix of the queue (priority level 1
//    first, FIFO within a level; requests whose timeout passed under
//    timeout_action DELAY come after all others). The prefix stops at the
//    first request whose non-batch dims or datatypes differ from the head's,
//    or that would overflow max_batch_size rows (a request with k rows
//    counts k).
//  * A batch is sent at once when it is full, when it cannot grow (next
//    request incompatible), when there is no max_queue_delay, or when it
//    reaches the largest preferred batch size. Otherwise the head waits up to
//    max_queue_delay. Whenever a batch is sent, it is the largest prefix whose
//    row count equals a preferred size, or the whole prefix if none does (so
//    with preferred [2] and 10 queued requests, batches of 2 go out).
//  * The queue holds at most max_queue_size requests: Push answers
//    UNAVAILABLE beyond that.
//  * Padding (batching.pad_inputs, core/batching_spec.h): requests that
//    differ only in their padded inputs' variable dimension are compatible.
//    A batch holds requests of one group (the head's bucket; beyond the last
//    bucket, its own length; every length without buckets), gathered from the first requests of the queue
//    (4 x max_batch_size of them, at least 64) skipping the others, which
//    keep their places. When the head's batch must wait and another group
//    already fills a batch, that one goes out.
//  * Ragged inputs (allow_ragged_batch) need only equal datatypes.
//  * Adaptive batching (batching.mode adaptive, adaptive_batching.h): the
//    wait for more requests is decided by AdaptiveBatching instead of
//    max_queue_delay; RecordExecution feeds it the batches' costs.
//  * Cancelled requests (InferRequest::cancelled) never run and take no
//    batch room: a decision answers those within reach of the next batch
//    (max_batch_size rows from the front) or past their queue timeout; a
//    Push that finds the queue full looks through all of it to make room
//    (at most once between decisions when it finds none). So looking for
//    them costs a decision O(max_batch_size), however many requests wait.
//
// Thread-safety: none; the owner serializes access (DynamicBatcher holds its
// mutex around every call).
#pragma once

#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include "core/model_spec.h"
#include "core/status.h"
#include "scheduler/adaptive_batching.h"
#include "scheduler/pending_request.h"

namespace inferd {

struct BatchPolicy {
  int max_batch_size = 0;                  // 0 = the model does not batch
  bool dynamic = false;                    // batch several requests together
  std::vector<int> preferred_batch_sizes;  // ascending
  Duration max_queue_delay{0};
  uint32_t priority_levels = 0;  // 0 = one level
  uint32_t default_priority_level = 0;
  QueuePolicySpec queue;
  size_t max_queue_size = 0;  // effective bound (> 0)
  AdaptiveBatchingSpec adaptive;
  std::optional<PaddingSpec> padding;
  std::vector<bool> ragged;  // per input (ModelSpec::inputs order): allow_ragged_batch

  // From a spec; `default_max_queue_size` applies where the config sets none.
  static BatchPolicy FromSpec(const ModelSpec& spec, size_t default_max_queue_size);
};

class BatchQueue {
 public:
  // `cpu`: the machine's load for adaptive batching (not owned, outlives
  // the queue; may be null).
  explicit BatchQueue(BatchPolicy policy, CpuLoad* cpu = nullptr);

  // Assigns level, enqueue time and deadline; takes ownership only on OK.
  // UNAVAILABLE when full; INVALID_ARGUMENT for a priority out of range.
  Status Push(std::unique_ptr<PendingRequest>& p, TimePoint now);

  struct Decision {
    std::vector<std::unique_ptr<PendingRequest>> batch;      // run these now (may be empty)
    std::vector<std::unique_ptr<PendingRequest>> expired;    // fail these: timed out (REJECT)
    std::vector<std::unique_ptr<PendingRequest>> cancelled;  // fail these: their client gave up
    std::optional<TimePoint> wake_at;                        // when nothing is sent: when to call Next again
    int64_t padded_length = 1;                               // padded models: the batch's padded length
  };
  // `flush` sends whatever is queued without waiting (shutdown).
  Decision Next(TimePoint now, bool flush = false);

  size_t size() const { return size_; }
  // Whether Push would now refuse a request because the queue is full,
  // without looking for cancelled requests to make room (it already looked
  // since the last decision and found none).
  bool Rejecting() const { return size_ >= policy_.max_queue_size && !may_purge_; }
  bool empty() const { return size_ == 0 && purged_.empty(); }  // nothing left to run or answer
  const BatchPolicy& policy() const { return policy_; }

  // A batch of `rows` rows padded to `length` (1 when not padded) ran for
  // `took` (adaptive batching learns the model's cost from it).
  void RecordExecution(int64_t rows, int64_t length, Duration took);
  // Null unless batching.mode is adaptive.
  const AdaptiveBatching* adaptive() const { return adaptive_.get(); }

 private:
  using Queue = std::deque<std::unique_ptr<PendingRequest>>;
  void Expire(TimePoint now, Decision* d);
  // Moves the cancelled requests out of the queue into `out`, in batch order,
  // stopping once the live requests passed hold `reach` rows (0 = all).
  void RemoveCancelled(std::vector<std::unique_ptr<PendingRequest>>* out, int64_t reach);
  // Bookkeeping for a request leaving the queue.
  void Forget(const PendingRequest& p);
  std::vector<Queue*> Order();
  bool Compatible(const PendingRequest& a, const PendingRequest& b) const;
  // Adaptive batching's arrival-rate key for a request of `length`.
  int64_t RateKey(int64_t length) const;

  // The requests a batch would take, in batch order.
  struct Candidate {
    std::vector<std::pair<Queue*, size_t>> picks;
    std::vector<int64_t> cumulative;  // rows after each pick
    bool closed = false;              // cannot grow: full, or the next request is incompatible
    int64_t group = 0;
    int64_t max_length = 0;
    TimePoint oldest{};
  };
  // The compatible prefix from the head (no padding).
  Candidate Prefix(const std::vector<Queue*>& order) const;
  // Per group, from the front of the queue (padding); the head's first.
  std::vector<Candidate> Groups(const std::vector<Queue*>& order) const;
  // The largest prefix of `c` whose row count is a preferred batch size
  // (Triton's rule), or all of it.
  size_t PreferredPrefix(const Candidate& c) const;
  void Take(Candidate& c, size_t count, Decision* d);

  BatchPolicy policy_;
  std::vector<Queue> normal_;   // per level
  std::vector<Queue> delayed_;  // per level: timed out under DELAY
  size_t size_ = 0;
  size_t with_deadline_ = 0;  // queued requests that have a deadline (Expire skips its scan at 0)
  std::vector<std::unique_ptr<PendingRequest>> purged_;  // cancelled, removed by Push; reported by Next
  bool may_purge_ = true;  // false after a full Push found nothing to purge, until the next decision
  std::unique_ptr<AdaptiveBatching> adaptive_;  // batching.mode adaptive
};

}  // namespace inferd
