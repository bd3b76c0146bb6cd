#include "tracing/span_exporter.h"

#include <spdlog/spdlog.h>

namespace inferd::tracing {

SpanExporter::SpanExporter(Options options, Send send, Clock* clock)
    : options_(options), send_(std::move(send)), clock_(clock) {
  MutexLock j(&join_mu_);
  thread_ = std::thread([this] { Loop(); });
}

SpanExporter::~SpanExporter() { Stop(); }

void SpanExporter::Add(std::string_view spans, size_t count) {
  if (count == 0) return;
  bool wake = false;
  {
    MutexLock l(&mu_);
    // An empty queue takes a request's spans even beyond the limit (a queue smaller than one request would
    // otherwise drop every trace).
    if (stopped_ || (queued_spans_ != 0 && queued_spans_ + count > options_.max_queue_size)) {
      dropped_queue_full_.fetch_add(count, std::memory_order_relaxed);
      return;
    }
    // The first spans start the schedule's timer; a full batch goes at once.
    wake = full_.empty() && filling_.spans == 0;
    if (filling_.bytes.empty() && !spare_.empty()) {  // a new batch: into a sent one's buffer
      filling_.bytes.swap(spare_.back());
      spare_.pop_back();
    }
    filling_.bytes.append(spans);
    filling_.spans += count;
    queued_spans_ += count;
    if (filling_.spans >= options_.max_export_batch_size) {
      full_.push_back(std::move(filling_));
      filling_ = Batch();
      wake = true;
    }
  }
  if (wake) cv_.NotifyAll();
}

bool SpanExporter::Flush(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  MutexLock l(&mu_);
  if (stopped_) return queued_spans_ == 0;
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

bool SpanExporter::TakeBatch(Batch* out) {
  if (!full_.empty()) {
    *out = std::move(full_.front());
    full_.pop_front();
  } else if (filling_.spans != 0) {
    *out = std::move(filling_);
    filling_ = Batch();
  } else {
    return false;
  }
  queued_spans_ -= out->spans;
  return true;
}

void SpanExporter::Loop() {
  TimePoint next_send = clock_->Now() + options_.schedule_delay;
  MutexLock l(&mu_);
  for (;;) {
    // Wait for a full batch, the schedule, a flush or the stop.
    while (!stopping_ && flush_done_ == flush_wanted_ && full_.empty()) {
      if (filling_.spans != 0 && clock_->Now() >= next_send) break;
      if (filling_.spans == 0)
        cv_.Wait(&mu_);
      else
        cv_.WaitUntil(&mu_, clock_, next_send);
    }
    const uint64_t flushing = flush_wanted_;
    // Everything queued now goes, a batch at a time (a flush or the stop); otherwise one batch.
    const bool drain = stopping_ || flush_done_ != flush_wanted_;
    Batch batch;
    while (TakeBatch(&batch)) {
      l.Unlock();
      Status st = send_(batch.bytes, batch.spans);
      l.Lock();
      sends_.fetch_add(1, std::memory_order_relaxed);
      if (st.ok()) {
        exported_.fetch_add(batch.spans, std::memory_order_relaxed);
      } else {
        const uint64_t failures = send_failures_.fetch_add(1, std::memory_order_relaxed);
        dropped_send_failed_.fetch_add(batch.spans, std::memory_order_relaxed);
        // Once, then every 100th: a collector that is gone would fill the log.
        if (failures % 100 == 0) {
          spdlog::warn("tracing: {} spans dropped: {} (inferd_trace_spans_dropped_total counts them)", batch.spans,
                       st.message());
        }
      }
      // The buffer (its room kept) fills again: at steady state no batch allocates.
      batch.bytes.clear();
      if (spare_.size() < 2) spare_.push_back(std::move(batch.bytes));
      batch = Batch();
      if (!drain) break;
    }
    next_send = clock_->Now() + options_.schedule_delay;
    if (flushing != flush_done_) {
      flush_done_ = flushing;
      idle_cv_.NotifyAll();
    }
    // Stopping: what a batch-sized pass left (the stop came while it sent) goes in a drain pass first.
    if (stopping_ && queued_spans_ != 0) continue;
    if (stopping_) {
      stopped_ = true;
      idle_cv_.NotifyAll();
      return;
    }
  }
}

}  // namespace inferd::tracing
