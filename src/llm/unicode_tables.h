// Unicode character classes for tokenizers: letters (\p{L}), numbers (\p{N})
// and white space (\s), plus UTF-8 helpers. Generated tables in
// unicode_tables.cc (scripts/gen_unicode_tables.py).
//
// Thread-safety: pure functions over constant tables.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace inferd::llm {

struct CodePointRange {
  char32_t first, last;
};
extern const CodePointRange kLetterRanges[];
extern const size_t kLetterRangeCount;
extern const CodePointRange kNumberRanges[];
extern const size_t kNumberRangeCount;

bool IsLetter(char32_t c);
bool IsNumber(char32_t c);
// Unicode's White_Space property (what \s matches in the tokenizers' regexes).
bool IsWhiteSpace(char32_t c);

// The code point at s[*pos] and advances *pos past it; an invalid or
// truncated sequence yields U+FFFD and advances one byte.
char32_t NextCodePoint(std::string_view s, size_t* pos);
void AppendUtf8(std::string* out, char32_t c);

// `s` with every invalid UTF-8 sequence replaced by U+FFFD (JSON needs valid text).
std::string SanitizeUtf8(std::string_view s);
// Bytes at the end of `s` that begin a UTF-8 sequence not yet complete (0-3).
size_t IncompleteUtf8Tail(std::string_view s);

}  // namespace inferd::llm
