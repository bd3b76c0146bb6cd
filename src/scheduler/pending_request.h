// PendingRequest: one accepted request on its way through a scheduler.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "core/clock.h"
#include "core/infer_request.h"

namespace inferd {

struct PendingRequest {
  // Inputs are in ModelSpec::inputs order and validated against the spec.
  std::unique_ptr<InferRequest> request;
  InferCallback callback;
  // Partial responses before `callback` (ResponseSink::partial); may be null.
  PartialCallback partial;
  int64_t rows = 1;                   // batch-dimension size (1 when the model does not batch)
  TimePoint arrival{};                // when the server received it (start of request duration)
  TimePoint enqueued{};               // set by the queue
  std::optional<TimePoint> deadline;  // queue timeout, if any
  uint32_t level = 0;                 // priority queue index (0 = highest)
  int64_t length = 0;                 // padded models: positions along the first padded input's variable dim
};

}  // namespace inferd
