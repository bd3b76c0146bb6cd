// Minimal append-only JSON writing helpers for the response codecs: faster
// than building a DOM, and floats print in their shortest round-trip form.
#pragma once

#include <charconv>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace inferd::json {

inline void AppendEscaped(std::string* out, std::string_view s) {
  static const char kHex[] = "0123456789abcdef";
  out->push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      case '\b':
        out->append("\\b");
        break;
      case '\f':
        out->append("\\f");
        break;
      default:
        if (c < 0x20) {
          out->append("\\u00");
          out->push_back(kHex[c >> 4]);
          out->push_back(kHex[c & 0xf]);
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
  }
  out->push_back('"');
}

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
