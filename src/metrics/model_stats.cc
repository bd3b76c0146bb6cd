#include "metrics/model_stats.h"

namespace inferd {

const char* FailureReasonName(FailureReason r) {
  switch (r) {
    case FailureReason::kRejected:
      return "REJECTED";
    case FailureReason::kInvalid:
      return "INVALID";
    case FailureReason::kBackend:
      return "BACKEND";
    case FailureReason::kTimeout:
      return "TIMEOUT";
    case FailureReason::kCancelled:
      return "CANCELED";  // Triton's spelling
    case FailureReason::kOther:
    case FailureReason::kCount:
      break;
  }
  return "OTHER";
}

ModelStats::ModelStats(std::string model, std::string version, int max_batch_size)
    : model_(std::move(model)),
      version_(std::move(version)),
      by_batch_(static_cast<size_t>(std::max(1, max_batch_size)) + 1),
      request_us_(Histogram::LatencyMicrosBuckets()),
      queue_us_(Histogram::LatencyMicrosBuckets()),
      compute_input_us_(Histogram::LatencyMicrosBuckets()),
      compute_infer_us_(Histogram::LatencyMicrosBuckets()),
      compute_output_us_(Histogram::LatencyMicrosBuckets()),
      batch_size_(Histogram::BatchSizeBuckets(max_batch_size)) {}

void ModelStats::RecordSuccess(uint64_t request_ns, uint64_t queue_ns, uint64_t input_ns, uint64_t infer_ns,
                               uint64_t output_ns, uint64_t now_ms) {
  success_.Add(request_ns);
  queue_.Add(queue_ns);
  compute_input_.Add(input_ns);
  compute_infer_.Add(infer_ns);
  compute_output_.Add(output_ns);
  request_us_.Observe(static_cast<double>(request_ns) / 1e3);
  queue_us_.Observe(static_cast<double>(queue_ns) / 1e3);
  compute_input_us_.Observe(static_cast<double>(input_ns) / 1e3);
  compute_infer_us_.Observe(static_cast<double>(infer_ns) / 1e3);
  compute_output_us_.Observe(static_cast<double>(output_ns) / 1e3);
  last_inference_ms_.store(now_ms, std::memory_order_relaxed);
}

void ModelStats::RecordFailure(FailureReason reason, uint64_t request_ns) {
  fail_.Add(request_ns);
  failures_[static_cast<int>(reason)].fetch_add(1, std::memory_order_relaxed);
}

void ModelStats::RecordExecution(int rows, uint64_t input_ns, uint64_t infer_ns, uint64_t output_ns) {
  inference_count_.fetch_add(static_cast<uint64_t>(rows), std::memory_order_relaxed);
  execution_count_.fetch_add(1, std::memory_order_relaxed);
  batch_size_.Observe(rows);
  if (rows >= 0 && static_cast<size_t>(rows) < by_batch_.size()) {
    auto& b = by_batch_[static_cast<size_t>(rows)];
    b.input.Add(input_ns);
    b.infer.Add(infer_ns);
    b.output.Add(output_ns);
  }
}

std::vector<ModelStats::BatchStat> ModelStats::batch_stats() const {
  std::vector<BatchStat> out;
  for (size_t i = 0; i < by_batch_.size(); ++i) {
    const auto& b = by_batch_[i];
    const uint64_t c = b.infer.count.load(std::memory_order_relaxed);
    if (c == 0) continue;
    out.push_back({static_cast<int>(i), c, b.input.ns.load(std::memory_order_relaxed),
                   b.infer.ns.load(std::memory_order_relaxed), b.output.ns.load(std::memory_order_relaxed)});
  }
  return out;
}

}  // namespace inferd
