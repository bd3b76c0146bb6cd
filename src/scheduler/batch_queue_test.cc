#include "scheduler/batch_queue.h"

#include <gtest/gtest.h>

#include "testing/test_requests.h"

namespace inferd {
namespace {

using std::chrono::microseconds;
using testing::Pending;

const TimePoint kQueueT0 = TimePoint(std::chrono::seconds(100));

BatchPolicy Dynamic(int max_bs, int64_t delay_us, std::vector<int> preferred = {}) {
  BatchPolicy p;
  p.max_batch_size = max_bs;
  p.dynamic = true;
  p.max_queue_delay = microseconds(delay_us);
  p.preferred_batch_sizes = std::move(preferred);
  p.max_queue_size = 100;
  return p;
}

void Push(BatchQueue& q, std::unique_ptr<PendingRequest> p, TimePoint now = kQueueT0) {
  ASSERT_TRUE(q.Push(p, now).ok());
}

std::vector<int64_t> Rows(const BatchQueue::Decision& d) {
  std::vector<int64_t> r;
  for (const auto& p : d.batch) r.push_back(p->rows);
  return r;
}

TEST(BatchQueue, WaitsForTheDelayThenSendsWhatIsThere) {
  BatchQueue q(Dynamic(8, 1000));
  Push(q, Pending(1));
  Push(q, Pending(1));
  auto d = q.Next(kQueueT0);
  EXPECT_TRUE(d.batch.empty());
  ASSERT_TRUE(d.wake_at.has_value());
  EXPECT_EQ(*d.wake_at, kQueueT0 + microseconds(1000));
  EXPECT_TRUE(q.Next(kQueueT0 + microseconds(999)).batch.empty());
  d = q.Next(kQueueT0 + microseconds(1000));
  EXPECT_EQ(Rows(d), (std::vector<int64_t>{1, 1}));
  EXPECT_TRUE(q.empty());
}

TEST(BatchQueue, NoDelaySendsImmediately) {
  BatchQueue q(Dynamic(8, 0));
  Push(q, Pending(1));
  Push(q, Pending(2));
  EXPECT_EQ(Rows(q.Next(kQueueT0)), (std::vector<int64_t>{1, 2}));
}

TEST(BatchQueue, FullBatchIsSentWithoutWaiting) {
  BatchQueue q(Dynamic(4, 1000000));
  for (int i = 0; i < 5; ++i) Push(q, Pending(1));
  EXPECT_EQ(Rows(q.Next(kQueueT0)), (std::vector<int64_t>{1, 1, 1, 1}));
  EXPECT_EQ(q.size(), 1u);
}

TEST(BatchQueue, MultiRowRequestsCountTheirRows) {
  BatchQueue q(Dynamic(4, 1000000));
  Push(q, Pending(3));
  Push(q, Pending(2));  // would overflow: closes the batch
  EXPECT_EQ(Rows(q.Next(kQueueT0)), (std::vector<int64_t>{3}));
  EXPECT_EQ(Rows(q.Next(kQueueT0 + microseconds(1000000))), (std::vector<int64_t>{2}));
}

TEST(BatchQueue, ReachingTheLargestPreferredSizeSendsAtOnce) {
  BatchQueue q(Dynamic(8, 1000000, {2, 4}));
  for (int i = 0; i < 3; ++i) Push(q, Pending(1));
  EXPECT_TRUE(q.Next(kQueueT0).batch.empty());
  Push(q, Pending(1));
  EXPECT_EQ(Rows(q.Next(kQueueT0)).size(), 4u);
}

TEST(BatchQueue, PreferredSizeWinsEvenWhenAFullBatchIsQueued) {
  BatchQueue q(Dynamic(8, 1000, {2}));
  for (int i = 0; i < 10; ++i) Push(q, Pending(1));
  EXPECT_EQ(Rows(q.Next(kQueueT0)).size(), 2u);  // not 8: Triton sends preferred sizes when it can
  EXPECT_EQ(q.size(), 8u);
  BatchQueue no_delay(Dynamic(8, 0, {4}));
  for (int i = 0; i < 5; ++i) Push(no_delay, Pending(1));
  EXPECT_EQ(Rows(no_delay.Next(kQueueT0)).size(), 4u);
  BatchQueue no_fit(Dynamic(8, 0, {4}));
  Push(no_fit, Pending(3));
  Push(no_fit, Pending(2));  // prefix sums 3, 5: no preferred size reachable -> everything
  EXPECT_EQ(Rows(no_fit.Next(kQueueT0)), (std::vector<int64_t>{3, 2}));
}

TEST(BatchQueue, OnDelayExpirySendsTheLargestPreferredPrefix) {
  BatchQueue q(Dynamic(8, 1000, {2, 4}));
  for (int i = 0; i < 3; ++i) Push(q, Pending(1));
  auto d = q.Next(kQueueT0 + microseconds(1000));
  EXPECT_EQ(Rows(d).size(), 2u);  // 3 rows: the largest preferred prefix is 2
  EXPECT_EQ(q.size(), 1u);
}

TEST(BatchQueue, IncompatibleShapesAreNotBatchedTogether) {
  BatchQueue q(Dynamic(8, 1000000));
  Push(q, Pending(1, /*width=*/2));
  Push(q, Pending(1, /*width=*/3));
  Push(q, Pending(1, /*width=*/2));
  auto d = q.Next(kQueueT0);  // the batch cannot grow past the width-3 request: sent now
  ASSERT_EQ(d.batch.size(), 1u);
  EXPECT_EQ(d.batch[0]->request->inputs[0].shape[1], 2);
  d = q.Next(kQueueT0);
  ASSERT_EQ(d.batch.size(), 1u);
  EXPECT_EQ(d.batch[0]->request->inputs[0].shape[1], 3);
}

TEST(BatchQueue, QueueFullIsUnavailableAndKeepsOwnership) {
  BatchPolicy p = Dynamic(8, 1000);
  p.max_queue_size = 2;
  BatchQueue q(p);
  Push(q, Pending(1));
  Push(q, Pending(1));
  auto third = Pending(1);
  Status st = q.Push(third, kQueueT0);
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_NE(third, nullptr);
  EXPECT_EQ(q.size(), 2u);
}

TEST(BatchQueue, TimedOutRequestsAreRejected) {
  BatchPolicy p = Dynamic(8, 1000000);
  p.queue.default_timeout_us = 100;
  BatchQueue q(p);
  Push(q, Pending(1));
  auto d = q.Next(kQueueT0 + microseconds(50));
  EXPECT_TRUE(d.expired.empty());
  EXPECT_EQ(*d.wake_at, kQueueT0 + microseconds(100));  // woken for the deadline, not the delay
  d = q.Next(kQueueT0 + microseconds(100));
  EXPECT_EQ(d.expired.size(), 1u);
  EXPECT_TRUE(q.empty());
}

TEST(BatchQueue, RequestTimeoutOverridesOnlyDownwardsWhenAllowed) {
  BatchPolicy p = Dynamic(8, 1000000);
  p.queue.default_timeout_us = 1000;
  p.queue.allow_timeout_override = true;
  BatchQueue q(p);
  Push(q, Pending(1, 2, 0, /*timeout_us=*/10));
  Push(q, Pending(1, 2, 0, /*timeout_us=*/5000));  // cannot extend past the default
  auto d = q.Next(kQueueT0 + microseconds(10));
  EXPECT_EQ(d.expired.size(), 1u);
  d = q.Next(kQueueT0 + microseconds(1000));
  EXPECT_EQ(d.expired.size(), 1u);

  p.queue.allow_timeout_override = false;
  BatchQueue strict(p);
  Push(strict, Pending(1, 2, 0, /*timeout_us=*/10));
  EXPECT_TRUE(strict.Next(kQueueT0 + microseconds(10)).expired.empty());
}

TEST(BatchQueue, DelayActionKeepsTimedOutRequestsBehindOthers) {
  BatchPolicy p;
  p.max_batch_size = 8;
  p.dynamic = false;
  p.max_queue_size = 10;
  p.queue.default_timeout_us = 100;
  p.queue.delay_on_timeout = true;
  BatchQueue q(p);
  Push(q, Pending(1));
  Push(q, Pending(2), kQueueT0 + microseconds(90));
  auto d = q.Next(kQueueT0 + microseconds(100));  // first one timed out: delayed, not failed
  EXPECT_TRUE(d.expired.empty());
  EXPECT_EQ(Rows(d), (std::vector<int64_t>{2}));
  EXPECT_EQ(Rows(q.Next(kQueueT0 + microseconds(100))), (std::vector<int64_t>{1}));
}

// A pending request of `rows` rows covered by `flag`.
std::unique_ptr<PendingRequest> Cancellable(int64_t rows, const std::shared_ptr<Cancellation>& flag) {
  auto p = Pending(rows);
  p->request->cancellation = flag;
  return p;
}

TEST(BatchQueue, CancelledRequestsLeaveAtTheNextDecisionAndNeverRun) {
  BatchQueue q(Dynamic(4, 0));
  auto gone = std::make_shared<Cancellation>();
  auto live = std::make_shared<Cancellation>();
  Push(q, Cancellable(1, gone));
  Push(q, Cancellable(2, live));
  Push(q, Cancellable(3, gone));  // one flag may cover many requests (a stream)
  Push(q, Pending(1));            // not cancellable
  gone->Cancel();
  auto d = q.Next(kQueueT0);
  ASSERT_EQ(d.cancelled.size(), 2u);
  EXPECT_EQ(d.cancelled[0]->rows, 1);
  EXPECT_EQ(d.cancelled[1]->rows, 3);
  EXPECT_EQ(Rows(d), (std::vector<int64_t>{2, 1}));  // the cancelled rows do not take batch room
  EXPECT_TRUE(q.empty());
  EXPECT_TRUE(q.Next(kQueueT0).cancelled.empty());  // reported once
}

TEST(BatchQueue, CancelledRequestsAreAlsoTakenFromTheDelayedQueue) {
  BatchPolicy p = Dynamic(8, 1000000);
  p.queue.default_timeout_us = 100;
  p.queue.delay_on_timeout = true;
  BatchQueue q(p);
  auto flag = std::make_shared<Cancellation>();
  Push(q, Cancellable(1, flag));
  EXPECT_TRUE(q.Next(kQueueT0 + microseconds(100)).batch.empty());  // timed out: moved behind, still queued
  flag->Cancel();
  auto d = q.Next(kQueueT0 + microseconds(100));
  EXPECT_EQ(d.cancelled.size(), 1u);
  EXPECT_TRUE(d.batch.empty());
  EXPECT_TRUE(q.empty());
}

TEST(BatchQueue, ADecisionOnlyLooksForCancelledRequestsWithinReachOfTheNextBatch) {
  BatchQueue q(Dynamic(2, 0));
  auto flag = std::make_shared<Cancellation>();
  Push(q, Pending(1));
  Push(q, Pending(1));
  Push(q, Cancellable(1, flag));  // beyond the 2 rows a batch can take
  Push(q, Pending(1));
  flag->Cancel();
  auto d = q.Next(kQueueT0);
  EXPECT_TRUE(d.cancelled.empty());
  EXPECT_EQ(Rows(d), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(q.size(), 2u);
  d = q.Next(kQueueT0);  // now within reach: answered, and the batch takes the request behind it
  ASSERT_EQ(d.cancelled.size(), 1u);
  EXPECT_EQ(Rows(d), (std::vector<int64_t>{1}));
  EXPECT_TRUE(q.empty());
}

TEST(BatchQueue, ACancelledRequestBehindTimedOutOnesNeverRuns) {
  BatchPolicy p = Dynamic(2, 0);
  p.queue.default_timeout_us = 100;
  BatchQueue q(p);
  Push(q, Pending(1));
  Push(q, Pending(1));
  auto flag = std::make_shared<Cancellation>();
  auto late = Cancellable(1, flag);
  ASSERT_TRUE(q.Push(late, kQueueT0 + microseconds(50)).ok());  // times out 50 us after the two ahead
  flag->Cancel();
  auto d = q.Next(kQueueT0 + microseconds(100));  // the two ahead time out: the cancelled one moves to the front
  EXPECT_EQ(d.expired.size(), 2u);
  EXPECT_EQ(d.cancelled.size(), 1u);
  EXPECT_TRUE(d.batch.empty());
  EXPECT_TRUE(q.empty());
}

TEST(BatchQueue, AFullQueueMakesRoomByDroppingCancelledRequests) {
  BatchPolicy p = Dynamic(2, 0);
  p.max_queue_size = 2;
  BatchQueue q(p);
  auto flag = std::make_shared<Cancellation>();
  Push(q, Pending(2));
  Push(q, Cancellable(1, flag));
  auto third = Pending(2);
  EXPECT_EQ(q.Push(third, kQueueT0).code(), StatusCode::kUnavailable);  // full, nothing cancelled
  flag->Cancel();
  // Having found nothing, a full queue does not look again before the next decision.
  EXPECT_EQ(q.Push(third, kQueueT0).code(), StatusCode::kUnavailable);
  auto d = q.Next(kQueueT0);
  EXPECT_EQ(Rows(d), (std::vector<int64_t>{2}));
  EXPECT_TRUE(d.cancelled.empty());  // beyond the batch's reach
  Push(q, std::move(third));
  auto fourth = Pending(1);
  ASSERT_TRUE(q.Push(fourth, kQueueT0).ok());  // full again: the cancelled one made room
  EXPECT_EQ(q.size(), 2u);
  EXPECT_FALSE(q.empty());
  d = q.Next(kQueueT0, /*flush=*/true);
  EXPECT_EQ(d.cancelled.size(), 1u);  // the dropped request is still answered, once
  EXPECT_EQ(Rows(d), (std::vector<int64_t>{2}));
  d = q.Next(kQueueT0);
  EXPECT_TRUE(d.cancelled.empty());
  EXPECT_EQ(Rows(d), (std::vector<int64_t>{1}));
  EXPECT_TRUE(q.empty());
}

TEST(BatchQueue, HigherPriorityGoesFirst) {
  BatchPolicy p = Dynamic(2, 0);
  p.priority_levels = 2;
  p.default_priority_level = 2;
  BatchQueue q(p);
  Push(q, Pending(1, 2, /*priority=*/0));  // default level 2
  Push(q, Pending(1, 2, /*priority=*/2));
  Push(q, Pending(1, 2, /*priority=*/1));
  auto d = q.Next(kQueueT0);
  ASSERT_EQ(d.batch.size(), 2u);
  EXPECT_EQ(d.batch[0]->level, 0u);  // the priority-1 request, though it came last
  EXPECT_EQ(d.batch[1]->level, 1u);
  auto bad = Pending(1, 2, /*priority=*/3);
  EXPECT_EQ(q.Push(bad, kQueueT0).code(), StatusCode::kInvalidArgument);
}

TEST(BatchQueue, BackgroundRequestsWaitBehindEveryPriorityLevel) {
  BatchPolicy p = Dynamic(2, 0);
  p.priority_levels = 2;
  p.default_priority_level = 1;
  BatchQueue q(p);
  auto job = Pending(1, 2, /*priority=*/1);
  job->request->background = true;  // its priority is ignored
  Push(q, std::move(job));
  Push(q, Pending(1, 2, /*priority=*/2));
  Push(q, Pending(1, 2, /*priority=*/0));
  auto d = q.Next(kQueueT0);
  ASSERT_EQ(d.batch.size(), 2u);
  EXPECT_FALSE(d.batch[0]->request->background);
  EXPECT_FALSE(d.batch[1]->request->background);
  d = q.Next(kQueueT0);
  ASSERT_EQ(d.batch.size(), 1u);
  EXPECT_TRUE(d.batch[0]->request->background);
  EXPECT_EQ(d.batch[0]->level, 2u);  // below the two configured levels
}

TEST(BatchQueue, BackgroundRequestsWithoutPriorityLevelsComeLast) {
  BatchQueue q(Dynamic(1, 0));
  auto job = Pending(1);
  job->request->background = true;
  Push(q, std::move(job));
  Push(q, Pending(1));
  EXPECT_FALSE(q.Next(kQueueT0).batch.at(0)->request->background);
  EXPECT_TRUE(q.Next(kQueueT0).batch.at(0)->request->background);
}

TEST(BatchQueue, WithoutDynamicBatchingEachRequestRunsAlone) {
  BatchPolicy p;
  p.max_batch_size = 8;
  p.max_queue_size = 10;
  BatchQueue q(p);
  Push(q, Pending(2));
  Push(q, Pending(3));
  EXPECT_EQ(Rows(q.Next(kQueueT0)), (std::vector<int64_t>{2}));
  EXPECT_EQ(Rows(q.Next(kQueueT0)), (std::vector<int64_t>{3}));
}

TEST(BatchQueue, FlushSendsWithoutWaiting) {
  BatchQueue q(Dynamic(8, 1000000));
  Push(q, Pending(1));
  EXPECT_EQ(q.Next(kQueueT0, /*flush=*/true).batch.size(), 1u);
}

}  // namespace
}  // namespace inferd
