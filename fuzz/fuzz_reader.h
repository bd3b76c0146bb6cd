// What fuzz targets that build structures from their input share: a reader that takes the input in turn (zeros
// once it is used up) and a check that aborts (libFuzzer reports the input).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

namespace inferd::fuzz {

struct Reader {
  std::string_view in;
  uint64_t U64() {
    uint64_t v = 0;
    const size_t n = std::min<size_t>(8, in.size());
    std::memcpy(&v, in.data(), n);
    in.remove_prefix(n);
    return v;
  }
  uint8_t Byte() {
    if (in.empty()) return 0;
    const uint8_t b = static_cast<uint8_t>(in.front());
    in.remove_prefix(1);
    return b;
  }
  // Up to `max` bytes (the count from the input).
  std::string Str(size_t max = 23) {
    const size_t n = std::min<size_t>(Byte() % (max + 1), in.size());
    std::string s(in.substr(0, n));
    in.remove_prefix(n);
    return s;
  }
};

inline void Check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace inferd::fuzz
