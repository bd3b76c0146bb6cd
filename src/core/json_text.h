// JSON string literals, for code that writes JSON by hand (the response
// codecs through frontends/codec/json_writer.h, tracing's OTLP and access-log
// lines): `s` quoted, with quotes, backslashes and control characters
// escaped. Bytes are copied as they are: callers that may hold invalid UTF-8
// clean it first (llm::SanitizeUtf8).
#pragma once

#include <string>
#include <string_view>

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

}  // namespace inferd::json
