#include "console/query.h"

#include "core/percent_decoding.h"

namespace inferd::console {

std::string QueryValue(std::string_view query, std::string_view key) {
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    const size_t eq = pair.find('=');
    if (pair.substr(0, eq) != key) continue;
    if (eq == std::string_view::npos) return std::string();
    std::string v;
    AppendPercentDecoded(&v, pair.substr(eq + 1), /*plus_is_space=*/true);
    return v;
  }
  return std::string();
}

}  // namespace inferd::console
