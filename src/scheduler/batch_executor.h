// ExecuteBatch: runs one formed batch on one model instance and completes
// every request in it (exactly one callback each).
//
// Concatenates inputs along the batch dimension (no copy for a single
// request), applies reshape, calls the backend, checks its outputs against
// the spec, slices them back per request (views, no copies) and records
// statistics.
#pragma once

#include <memory>
#include <vector>

#include "backends/backend.h"
#include "core/clock.h"
#include "core/model_spec.h"
#include "metrics/model_stats.h"
#include "scheduler/pending_request.h"

namespace inferd {

void ExecuteBatch(ModelInstance& instance, const ModelSpec& spec, std::vector<std::unique_ptr<PendingRequest>>& batch,
                  ModelStats* stats, Clock& clock);

// Fails one request: callback with `status`, stats updated.
void FailRequest(PendingRequest& p, const Status& status, FailureReason reason, ModelStats* stats, Clock& clock);

}  // namespace inferd
