// Minimal append-only JSON writing helpers for the response codecs: faster
// than building a DOM, and floats print in their shortest round-trip form.
#pragma once

#include <charconv>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/json_text.h"

namespace inferd::json {

template <typename T>
inline void AppendNumber(std::string* out, T v) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(v)) return out->append("NaN"), void();
    if (std::isinf(v)) return out->append(v > 0 ? "Infinity" : "-Infinity"), void();
  }
  char buf[40];
  auto [p, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out->append(buf, p);
}

inline void AppendKey(std::string* out, std::string_view key) {
  AppendEscaped(out, key);
  out->push_back(':');
}

// ["a","b",...], each escaped.
inline void AppendStringArray(std::string* out, const std::vector<std::string>& xs) {
  out->push_back('[');
  for (size_t i = 0; i < xs.size(); ++i) {
    if (i) out->push_back(',');
    AppendEscaped(out, xs[i]);
  }
  out->push_back(']');
}

}  // namespace inferd::json
