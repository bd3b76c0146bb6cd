// Integer parameters of a model's config (`parameters { key: ... value: {
// string_value: ... } }`) as the generative scheduler and its speculation
// options read them.
//
// Thread-safety: a pure function.
#pragma once

#include <cstdint>

#include "core/model_spec.h"
#include "core/status.h"

namespace inferd {

// The parameter `name` as an integer in [lo, hi]; `fallback` when absent;
// INVALID_ARGUMENT naming it and the range otherwise.
Result<int64_t> IntParameter(const ModelSpec& spec, const char* name, int64_t lo, int64_t hi, int64_t fallback);

}  // namespace inferd
