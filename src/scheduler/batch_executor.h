// ExecuteBatch: runs one formed batch on one model instance and completes
// every request in it (exactly one callback each).
//
// Concatenates inputs along the batch dimension (no copy for a single
// request), applies reshape, calls the backend, checks its outputs against
// the spec, slices them back per request (views, no copies) and records
// statistics, and a traced request's queue and compute spans (Triton's
// COMPUTE_* events on the compute span).
#pragma once

#include <memory>
#include <vector>

#include "backends/backend.h"
#include "core/clock.h"
#include "core/model_spec.h"
#include "metrics/model_stats.h"
#include "scheduler/pending_request.h"

namespace inferd {

// `instance_index`: which of the version's instances runs it (traced
// requests' compute spans name it; -1: not known).
void ExecuteBatch(ModelInstance& instance, const ModelSpec& spec, std::vector<std::unique_ptr<PendingRequest>>& batch,
                  ModelStats* stats, Clock& clock, int instance_index = -1);

// Fails one request: callback with `status`, stats updated.
void FailRequest(PendingRequest& p, const Status& status, FailureReason reason, ModelStats* stats, Clock& clock);

}  // namespace inferd
