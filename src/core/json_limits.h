// What a JSON body from the network may hold (docs/http_api.md, "Limits"):
// checked while it is parsed, so that a body within the byte limit cannot
// still make a huge document (a 64 MiB `[1,1,1,...]` is 32 million values)
// or nest without end. Set by `serve` (--json-max-depth,
// --json-max-elements); the defaults hold any tensor a 64 MiB body can carry
// in a sensible shape.
#pragma once

#include <cstddef>

namespace inferd {

struct JsonLimits {
  size_t max_depth = 64;                  // arrays and objects inside one another
  size_t max_elements = size_t{1} << 24;  // values (numbers, strings, arrays, objects...) in one body
};

}  // namespace inferd
