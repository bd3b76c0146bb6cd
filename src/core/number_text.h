// Numbers as text and as tensor elements: the parsing and writing shared by
// batch-job rows (jobs/row_encoder), stored predictions and Redis features
// (features/feature_vector) and the config parameters that list names or
// values (core/precomputed_spec, core/feature_spec).
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/datatype.h"

namespace inferd {

// `s` without leading and trailing spaces, tabs, CR and LF.
std::string_view TrimSpace(std::string_view s);

// The comma-separated items of `s`, each trimmed (empty items kept: callers refuse them).
std::vector<std::string> SplitList(std::string_view s);

// A number from text (trimmed; a leading '+' allowed): an integer when it is
// one exactly, else a real. std::from_chars: locale-free, several times
// faster than strtod. False for anything else, or more than 64 characters.
bool ParseNumber(std::string_view text, bool* is_int, int64_t* i, double* d);

// INT8..INT64 and UINT8..UINT64 (not BOOL).
bool IsIntegerType(DataType dt);

// Appends one element of `dt` (little-endian) from an integer or a real;
// false when it does not fit (out of range, a fraction for an integer type,
// not finite for an integer type, or a non-numeric datatype).
bool AppendNumber(std::string* out, DataType dt, bool is_int, int64_t i, double d);

}  // namespace inferd
