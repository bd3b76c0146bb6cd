// Echo: output i is input i, renamed to the spec's output i. Shared by the
// test backends (identity, gate). Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "core/model_spec.h"
#include "core/status.h"
#include "core/tensor.h"

namespace inferd {

// INVALID_ARGUMENT unless outputs match the inputs in count and datatypes;
// `what` names the model in the message ("identity model 'm'").
Status CheckEchoSpec(const ModelSpec& spec, const std::string& what);

std::vector<Tensor> EchoInputs(const ModelSpec& spec, const std::vector<Tensor>& inputs);

}  // namespace inferd
