// Shadow traffic: a request that the traffic policy mirrors also runs on the
// shadow version. The client's answer is never delayed, changed or failed by
// it: the served answer goes to the client first, the shadow's is compared
// with it when both are in (server/shadow_compare.h) and counted on the
// shadow version's statistics (agreed, disagreed, failed; the largest
// difference). The shadow request queues at the shadow model's lowest
// priority level when it has priority levels.
//
// Thread-safety: MirrorRequest is called on the request path; the returned
// callback and the shadow's completion may run on any threads.
#pragma once

#include <memory>

#include "core/clock.h"
#include "core/infer_request.h"
#include "manager/model_version.h"

namespace inferd {

// Submits a copy of `request` (routed, validated) to `shadow` and returns
// the callback to use in place of `final` for the served answer. When
// `max_in_flight` shadow requests of that version are already running or
// queued, nothing is mirrored (counted skipped) and `final` is returned.
InferCallback MirrorRequest(const InferRequest& request, std::shared_ptr<ModelVersion> shadow, InferCallback final,
                            Clock& clock, int64_t max_in_flight);

}  // namespace inferd
