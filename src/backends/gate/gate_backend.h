// The gate backend: a test and diagnostic backend (in the spirit of Triton's
// identity and repeat test models) whose executions start and finish when a
// client says so, so tests of queueing, cancellation, deadlines and overload
// hold a model busy without timing anything.
//
// Config (backend: "gate"), parameters (string values):
//   role  "held" (default): output i = input i (same datatype), after waiting
//         while the model's gate is closed;
//         "control": one input "open" and one output "waiting", both TYPE_INT32
//         dims [1] with max_batch_size 0: open = 1 opens the gate, 0 closes
//         it, -1 only reads; waiting = executions waiting at the gate now.
//   gate  the gate's name (default: the model's name): a held model and its
//         control model name the same gate.
//   max_hold_ms  how long a held execution waits at most (default 60000);
//         after that it fails with UNAVAILABLE, so nothing waits forever.
// Gates start closed and live as long as the backend (the process).
//
// Thread-safety: executions and control calls run on any instance threads.
#pragma once

#include <memory>

#include "backends/backend.h"

namespace inferd {

std::unique_ptr<Backend> MakeGateBackend();
Status RegisterGateBackend(BackendRegistry* registry);

}  // namespace inferd
