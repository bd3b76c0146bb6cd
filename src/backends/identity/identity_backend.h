// The identity backend: output i is input i, unchanged (renamed to the
// spec's output i). It proves the core is framework-neutral and gives tests a
// model without libtorch. Config: backend: "identity"; outputs must match the
// inputs' datatypes and counts.
#pragma once

#include <memory>

#include "backends/backend.h"

namespace inferd {

std::unique_ptr<Backend> MakeIdentityBackend();
Status RegisterIdentityBackend(BackendRegistry* registry);

}  // namespace inferd
