// Query strings of the console's routes (?model=M&points=N). Pure; fuzzed (fuzz/fuzz_console.cc).
#pragma once

#include <string>
#include <string_view>

namespace inferd::console {

// The value of `key` in a query string ("a=1&b=x%20y"): the first pair named `key`, %XX and '+' decoded; ""
// when absent. A malformed escape is kept as it is.
std::string QueryValue(std::string_view query, std::string_view key);

}  // namespace inferd::console
