// Byte sizes as users write them on the command line and in model configs:
// "1073741824", "512MiB", "2GiB", "1.5G", "300MB".
//
// Units: B; KiB MiB GiB TiB and the bare K M G T (also k, m, g, t) are powers
// of 1024; KB MB GB TB are powers of 1000. Case-insensitive after the number.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

namespace inferd {

// INVALID_ARGUMENT for anything else (negative, no digits, unknown unit,
// more than 2^63 bytes).
Result<uint64_t> ParseByteSize(std::string_view text);

// "1.5 GiB", "512 MiB", "900 B": for logs and listings.
std::string FormatBytes(uint64_t bytes);

}  // namespace inferd
