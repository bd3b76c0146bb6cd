// The backend behind platform "ensemble" (Triton's ensembles). An ensemble
// has no model file and runs no code of its own: its scheduler
// (scheduler/ensemble_scheduler.h) sends each step to the composing model.
// This backend only lets such a config load: its instances refuse to run.
// Thread-safety: stateless.
#pragma once

#include <memory>

#include "backends/backend.h"

namespace inferd {

std::unique_ptr<Backend> MakeEnsembleBackend();
Status RegisterEnsembleBackend(BackendRegistry* registry);

}  // namespace inferd
