// The TorchScript backend ("pytorch" / platform "pytorch_libtorch").
//
// Loads <version>/model.pt (or default_model_filename) with Debian's libtorch,
// runs forward() under c10::InferenceMode with the model's intra-op thread
// count set on each instance's worker thread (parameter INTRA_OP_THREAD_COUNT).
// Inputs map to forward()'s arguments by name where every config input name
// matches an argument name, else by config order. Outputs come from a tensor,
// a tuple/list of tensors (config order, or the index in an "OUTPUT__<i>"
// name) or a Dict[str, Tensor] (by name).
//
// Instances of one model share the loaded Module (forward is thread-safe for
// inference), so extra instances cost threads, not model memory.
#pragma once

#include <memory>

#include "backends/backend.h"

namespace inferd {

std::unique_ptr<Backend> MakeTorchScriptBackend();
Status RegisterTorchScriptBackend(BackendRegistry* registry);

}  // namespace inferd
