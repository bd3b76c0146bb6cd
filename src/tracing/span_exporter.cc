#include "tracing/span_exporter.h"

#include <spdlog/spdlog.h>

namespace inferd::tracing {

SpanExporter::SpanExporter(Options options, Send send, Clock* clock)
    : options_(options), send_(std::move(send)), clock_(clock) {
  {
    MutexLock l(&mu_);
    queue_.reserve(options_.max_export_batch_size);
    spare_.reserve(options_.max_export_batch_size);
  }
  MutexLock j(&join_mu_);
  thread_ = std::thread([this] { Loop(); });
}

SpanExporter::~SpanExporter() { Stop(); }

void SpanExporter::Add(SpanRecord span) {
  bool wake = false;
  {
    MutexLock l(&mu_);
    if (stopped_ || queue_.size() >= options_.max_queue_size) {
      dropped_queue_full_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    queue_.push_back(std::move(span));
    // The first span starts the schedule's timer; a full batch goes at once.
    wake = queue_.size() == 1 || queue_.size() == options_.max_export_batch_size;
  }
  if (wake) cv_.NotifyAll();
}

void SpanExporter::AddAll(std::vector<SpanRecord> spans) {
  bool wake = false;
  {
    MutexLock l(&mu_);
    const size_t before = queue_.size();
    for (auto& span : spans) {
      if (stopped_ || queue_.size() >= options_.max_queue_size) {
        dropped_queue_full_.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      queue_.push_back(std::move(span));
    }
    const size_t batch = options_.max_export_batch_size;
    wake = (before == 0 && !queue_.empty()) || (before < batch && queue_.size() >= batch);
  }
  if (wake) cv_.NotifyAll();
}

bool SpanExporter::Flush(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  MutexLock l(&mu_);
  if (stopped_) return queue_.empty();
  const uint64_t ticket = ++flush_wanted_;
  cv_.NotifyAll();
  while (flush_done_ < ticket && !stopped_) {
    const auto left = deadline - std::chrono::steady_clock::now();
    if (left <= std::chrono::steady_clock::duration::zero()) return false;
    idle_cv_.WaitForReal(&mu_, left);
  }
  return flush_done_ >= ticket;
}

void SpanExporter::Stop() {
  {
    MutexLock l(&mu_);
    stopping_ = true;
  }
  cv_.NotifyAll();
  MutexLock j(&join_mu_);
  if (thread_.joinable()) thread_.join();
}

SpanExporter::Counters SpanExporter::counters() const {
  Counters c;
  c.exported = exported_.load(std::memory_order_relaxed);
  c.dropped_queue_full = dropped_queue_full_.load(std::memory_order_relaxed);
  c.dropped_send_failed = dropped_send_failed_.load(std::memory_order_relaxed);
  c.sends = sends_.load(std::memory_order_relaxed);
  c.send_failures = send_failures_.load(std::memory_order_relaxed);
  return c;
}

void SpanExporter::Loop() {
  TimePoint next_send = clock_->Now() + options_.schedule_delay;
  MutexLock l(&mu_);
  for (;;) {
    // Wait for a full batch, the schedule, a flush or the stop.
    while (!stopping_ && flush_done_ == flush_wanted_ && queue_.size() < options_.max_export_batch_size) {
      if (!queue_.empty() && clock_->Now() >= next_send) break;
      if (queue_.empty())
        cv_.Wait(&mu_);
      else
        cv_.WaitUntil(&mu_, clock_, next_send);
    }
    const uint64_t flushing = flush_wanted_;
    // Everything queued now goes, a batch at a time (a flush or the stop); otherwise one batch.
    const bool drain = stopping_ || flush_done_ != flush_wanted_;
    do {
      if (queue_.empty()) break;
      std::vector<SpanRecord> batch;
      if (queue_.size() <= options_.max_export_batch_size) {
        // The usual case: the whole queue, no span moved; the last batch's buffer (its room kept) takes its place,
        // so spans recorded meanwhile do not grow a new one.
        batch.swap(queue_);
        queue_.swap(spare_);
      } else {
        const auto cut = queue_.begin() + static_cast<std::ptrdiff_t>(options_.max_export_batch_size);
        batch.assign(std::make_move_iterator(queue_.begin()), std::make_move_iterator(cut));
        queue_.erase(queue_.begin(), cut);
      }
      sending_ = true;
      l.Unlock();
      Status st = send_(batch);
      const size_t sent = batch.size();
      batch.clear();  // the spans are freed here, outside the lock
      l.Lock();
      sending_ = false;
      sends_.fetch_add(1, std::memory_order_relaxed);
      if (st.ok()) {
        exported_.fetch_add(sent, std::memory_order_relaxed);
      } else {
        const uint64_t failures = send_failures_.fetch_add(1, std::memory_order_relaxed);
        dropped_send_failed_.fetch_add(sent, std::memory_order_relaxed);
        // Once, then every 100th: a collector that is gone would fill the log.
        if (failures % 100 == 0) {
          spdlog::warn("tracing: {} spans dropped: {} (inferd_trace_spans_dropped_total counts them)", sent,
                       st.message());
        }
      }
      if (spare_.capacity() < batch.capacity()) spare_.swap(batch);
    } while (drain);
    next_send = clock_->Now() + options_.schedule_delay;
    if (flushing != flush_done_) {
      flush_done_ = flushing;
      idle_cv_.NotifyAll();
    }
    // Stopping: what a batch-sized pass left (the stop came while it sent) goes in a drain pass first.
    if (stopping_ && !queue_.empty()) continue;
    if (stopping_) {
      stopped_ = true;
      idle_cv_.NotifyAll();
      return;
    }
  }
}

}  // namespace inferd::tracing
