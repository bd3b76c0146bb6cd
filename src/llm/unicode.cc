#include <algorithm>

#include "llm/unicode_tables.h"

namespace inferd::llm {
namespace {

bool InRanges(const CodePointRange* r, size_t n, char32_t c) {
  const CodePointRange* end = r + n;
  const CodePointRange* it =
      std::upper_bound(r, end, c, [](char32_t v, const CodePointRange& x) { return v < x.first; });
  return it != r && c <= (it - 1)->last;
}

// Length of the sequence a lead byte starts (0: not a lead byte).
size_t SequenceLength(unsigned char b) {
  if (b < 0x80) return 1;
  if (b >= 0xC2 && b <= 0xDF) return 2;
  if (b >= 0xE0 && b <= 0xEF) return 3;
  if (b >= 0xF0 && b <= 0xF4) return 4;
  return 0;
}

}  // namespace

bool IsLetter(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  return InRanges(kLetterRanges, kLetterRangeCount, c);
}

bool IsNumber(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  return InRanges(kNumberRanges, kNumberRangeCount, c);
}

bool IsWhiteSpace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

char32_t NextCodePoint(std::string_view s, size_t* pos) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t i = *pos;
  const size_t len = SequenceLength(p[i]);
  if (len == 0 || i + len > s.size()) {
    *pos = i + 1;
    return 0xFFFD;
  }
  if (len == 1) {
    *pos = i + 1;
    return p[i];
  }
  char32_t c = p[i] & (0xFF >> (len + 1));
  for (size_t k = 1; k < len; ++k) {
    if ((p[i + k] & 0xC0) != 0x80) {
      *pos = i + 1;
      return 0xFFFD;
    }
    c = (c << 6) | (p[i + k] & 0x3F);
  }
  // Overlong forms (E0 80..9F, F0 80..8F), surrogates (ED A0..BF) and > U+10FFFF.
  if ((len == 3 && (c < 0x800 || (c >= 0xD800 && c <= 0xDFFF))) || (len == 4 && (c < 0x10000 || c > 0x10FFFF))) {
    *pos = i + 1;
    return 0xFFFD;
  }
  *pos = i + len;
  return c;
}

void AppendUtf8(std::string* out, char32_t c) {
  if (c < 0x80) {
    out->push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (c >> 6)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (c >> 12)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (c >> 18)));
    out->push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

std::string SanitizeUtf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  while (pos < s.size()) {
    const size_t start = pos;
    const char32_t c = NextCodePoint(s, &pos);
    if (c == 0xFFFD && pos == start + 1) {
      AppendUtf8(&out, 0xFFFD);
    } else {
      out.append(s.substr(start, pos - start));
    }
  }
  return out;
}

size_t IncompleteUtf8Tail(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  // Look back at most 3 bytes for a lead byte whose sequence runs past the end.
  for (size_t back = 1; back <= 3 && back <= s.size(); ++back) {
    const unsigned char b = p[s.size() - back];
    if ((b & 0xC0) == 0x80) continue;  // a continuation byte: keep looking for its lead
    const size_t len = SequenceLength(b);
    return len > back ? back : 0;
  }
  return 0;
}

}  // namespace inferd::llm
