// Hex digits and URL %XX escapes (RFC 3986), shared by the HTTP paths, the
// console's query strings and the token file's digests.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

namespace inferd {

// 0-15 for 0-9, a-f, A-F; -1 for anything else.
int HexDigitValue(char c);

// Appends `text` to `out` with every %XX (two hex digits) decoded; a '%' not
// followed by two hex digits is kept as it is. `plus_is_space`: '+' is a
// space (query strings, HTML forms), not in paths.
void AppendPercentDecoded(std::string* out, std::string_view text, bool plus_is_space);

}  // namespace inferd
