// ModelStats: the counters and histograms of one model version. One object
// feeds both the Prometheus endpoint and the KServe v2 statistics endpoint,
// so the two never disagree.
//
// Thread-safety: all recording methods are lock-free or take a short
// internal lock; safe from any thread. Owned by the server's model entry and
// shared (shared_ptr) with its scheduler.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "metrics/batching_stats.h"
#include "metrics/generative_stats.h"
#include "metrics/histogram.h"

namespace inferd {

struct DurationStat {
  std::atomic<uint64_t> count{0};
  std::atomic<uint64_t> ns{0};
  void Add(uint64_t n) {
    count.fetch_add(1, std::memory_order_relaxed);
    ns.fetch_add(n, std::memory_order_relaxed);
  }
};

enum class FailureReason : int { kRejected = 0, kInvalid, kBackend, kTimeout, kCancelled, kOther, kCount };
const char* FailureReasonName(FailureReason r);

class ModelStats {
 public:
  ModelStats(std::string model, std::string version, int max_batch_size);

  const std::string& model() const { return model_; }
  const std::string& version() const { return version_; }

  // A generative model's own statistics: created by its scheduler (the
  // first call), null for other models.
  GenerativeStats* EnableGenerative() {
    std::call_once(generative_once_, [this] { generative_.store(new GenerativeStats(), std::memory_order_release); });
    return generative_.load(std::memory_order_acquire);
  }
  const GenerativeStats* generative() const { return generative_.load(std::memory_order_acquire); }
  // Adaptive batching's estimates and padding's counters: created by the
  // dynamic batcher of a model that uses either (the first call), else null.
  BatchingStats* EnableBatching() {
    std::call_once(batching_once_, [this] { batching_.store(new BatchingStats(), std::memory_order_release); });
    return batching_.load(std::memory_order_acquire);
  }
  const BatchingStats* batching() const { return batching_.load(std::memory_order_acquire); }
  BatchingStats* batching() { return batching_.load(std::memory_order_acquire); }
  ~ModelStats() {
    delete generative_.load();
    delete batching_.load();
  }
  ModelStats(const ModelStats&) = delete;
  ModelStats& operator=(const ModelStats&) = delete;

  // A request completed successfully; durations in nanoseconds.
  void RecordSuccess(uint64_t request_ns, uint64_t queue_ns, uint64_t input_ns, uint64_t infer_ns, uint64_t output_ns,
                     uint64_t now_ms);
  void RecordFailure(FailureReason reason, uint64_t request_ns);
  // A batch of `rows` rows (in `requests` requests) was executed.
  void RecordExecution(int rows, uint64_t input_ns, uint64_t infer_ns, uint64_t output_ns);
  void AddPending(int64_t delta) { pending_.fetch_add(delta, std::memory_order_relaxed); }
  // Whether an execution error at `now_ns` should be logged: at most one a
  // second per model version, so a stream of bad requests cannot flood the log.
  bool ShouldLogError(int64_t now_ns) {
    int64_t last = last_error_log_ns_.load(std::memory_order_relaxed);
    return now_ns - last >= 1'000'000'000 &&
           last_error_log_ns_.compare_exchange_strong(last, now_ns, std::memory_order_relaxed);
  }

  // Shadow traffic this version ran (its answers compared with the served
  // ones, never returned): failed = the shadow answered an error.
  void RecordShadow(bool failed, bool agreed, double max_abs_diff) {
    (failed ? shadow_failed_ : agreed ? shadow_agreed_ : shadow_disagreed_).fetch_add(1, std::memory_order_relaxed);
    double seen = shadow_max_abs_diff_.load(std::memory_order_relaxed);
    while (max_abs_diff > seen &&
           !shadow_max_abs_diff_.compare_exchange_weak(seen, max_abs_diff, std::memory_order_relaxed)) {
    }
  }

  // Bounds the shadow requests running or queued on this version: false
  // (and counted skipped) when `limit` are already in flight, so a slow
  // shadow never piles up copies of requests. Each true is paired with one
  // EndShadow().
  bool TryStartShadow(int64_t limit) {
    if (shadow_in_flight_.fetch_add(1, std::memory_order_relaxed) < limit) return true;
    shadow_in_flight_.fetch_sub(1, std::memory_order_relaxed);
    shadow_skipped_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  void EndShadow() { shadow_in_flight_.fetch_sub(1, std::memory_order_relaxed); }

  // The response cache (Triton's cache_hit / cache_miss statistics): a hit
  // answered from the cache in `ns`; a miss's lookup and insertion took `ns`.
  void RecordCacheHit(uint64_t ns) { cache_hit_.Add(ns); }
  void RecordCacheMiss(uint64_t ns) { cache_miss_.Add(ns); }
  const DurationStat& cache_hit() const { return cache_hit_; }
  const DurationStat& cache_miss() const { return cache_miss_; }

  // Read side.
  uint64_t shadow_agreed() const { return shadow_agreed_.load(std::memory_order_relaxed); }
  uint64_t shadow_disagreed() const { return shadow_disagreed_.load(std::memory_order_relaxed); }
  uint64_t shadow_failed() const { return shadow_failed_.load(std::memory_order_relaxed); }
  uint64_t shadow_skipped() const { return shadow_skipped_.load(std::memory_order_relaxed); }
  int64_t shadow_in_flight() const { return shadow_in_flight_.load(std::memory_order_relaxed); }
  double shadow_max_abs_diff() const { return shadow_max_abs_diff_.load(std::memory_order_relaxed); }
  uint64_t last_inference_ms() const { return last_inference_ms_.load(std::memory_order_relaxed); }
  uint64_t inference_count() const { return inference_count_.load(std::memory_order_relaxed); }
  uint64_t execution_count() const { return execution_count_.load(std::memory_order_relaxed); }
  int64_t pending() const { return pending_.load(std::memory_order_relaxed); }
  uint64_t success_count() const { return success_.count.load(std::memory_order_relaxed); }
  uint64_t failure_count(FailureReason r) const {
    return failures_[static_cast<int>(r)].load(std::memory_order_relaxed);
  }

  const DurationStat& success() const { return success_; }
  const DurationStat& fail() const { return fail_; }
  const DurationStat& queue() const { return queue_; }
  const DurationStat& compute_input() const { return compute_input_; }
  const DurationStat& compute_infer() const { return compute_infer_; }
  const DurationStat& compute_output() const { return compute_output_; }

  struct BatchStat {
    int batch_size;
    uint64_t count, input_ns, infer_ns, output_ns;
  };
  std::vector<BatchStat> batch_stats() const;

  const Histogram& request_us() const { return request_us_; }
  const Histogram& queue_us() const { return queue_us_; }
  const Histogram& compute_input_us() const { return compute_input_us_; }
  const Histogram& compute_infer_us() const { return compute_infer_us_; }
  const Histogram& compute_output_us() const { return compute_output_us_; }
  const Histogram& batch_size() const { return batch_size_; }

 private:
  std::once_flag generative_once_;
  std::atomic<GenerativeStats*> generative_{nullptr};  // owned
  std::once_flag batching_once_;
  std::atomic<BatchingStats*> batching_{nullptr};  // owned
  struct BatchAcc {
    DurationStat input, infer, output;
  };
  std::string model_, version_;
  std::atomic<uint64_t> last_inference_ms_{0};
  std::atomic<uint64_t> inference_count_{0};
  std::atomic<uint64_t> execution_count_{0};
  std::atomic<int64_t> last_error_log_ns_{INT64_MIN / 2};
  std::atomic<int64_t> pending_{0};
  std::atomic<uint64_t> shadow_agreed_{0}, shadow_disagreed_{0}, shadow_failed_{0}, shadow_skipped_{0};
  std::atomic<int64_t> shadow_in_flight_{0};
  std::atomic<double> shadow_max_abs_diff_{0};
  DurationStat cache_hit_, cache_miss_;
  DurationStat success_, fail_, queue_, compute_input_, compute_infer_, compute_output_;
  std::array<std::atomic<uint64_t>, static_cast<int>(FailureReason::kCount)> failures_{};
  std::vector<BatchAcc> by_batch_;  // index = batch size (rows); fixed at construction
  Histogram request_us_, queue_us_, compute_input_us_, compute_infer_us_, compute_output_us_, batch_size_;
};

}  // namespace inferd
