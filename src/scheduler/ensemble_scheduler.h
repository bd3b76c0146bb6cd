// EnsembleScheduler: the scheduler of a platform "ensemble" model (Triton's
// ensembles). Each accepted request becomes a run over the EnsemblePlan: a
// step is submitted through the RequestSubmitter, as a request to its
// composing model, as soon as every tensor it reads exists, so each step
// batches with the other traffic to that model and independent steps run in
// parallel. Tensors pass between steps as views of the producing model's
// answer (no copies) and are dropped once their last reader was submitted.
// The first failing step fails the run ("ensemble 'e' step 1 (model 'm'):
// ..." with that step's status code); steps already submitted finish, none
// start. The ensemble's own statistics count its requests end to end; each
// step counts in its composing model's statistics.
//
// At load, Create compiles and checks the plan against the composing models'
// configs (RequestSubmitter::Describe, which loads a model that does not
// serve yet); a step naming an ensemble whose load is in progress on this
// thread is a cycle and fails the load.
//
// `max_inflight_responses` bounds the requests in flight through the
// ensemble; more wait in a FIFO (at most the model's queue bound, then
// UNAVAILABLE).
// Thread-safety: all methods are thread-safe.
#pragma once

#include <memory>

#include "scheduler/scheduler_factory.h"

namespace inferd {

Result<std::unique_ptr<Scheduler>> MakeEnsembleScheduler(SchedulerContext context);

}  // namespace inferd
