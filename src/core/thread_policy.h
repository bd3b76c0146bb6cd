// How inferd's threads ask the OS scheduler to treat them (Linux).
//
// Model worker threads are throughput threads: woken by the I/O thread that
// queued a request, they should not take the core from it at once -- on a
// shared core that preemption is a context switch per request, and the I/O
// thread, let run on, reads the other requests that are ready so that the
// worker starts with a batch. SCHED_BATCH says exactly that (the woken thread
// does not preempt; its share of the CPU is unchanged; no privilege needed).
//
// Thread-safety: each call affects the calling thread only.
#pragma once

#include "core/status.h"

namespace inferd {

// The calling thread becomes SCHED_BATCH (nice value kept). An error from the
// OS is returned (the thread keeps its policy); callers may ignore it.
Status UseBatchScheduling();

}  // namespace inferd
