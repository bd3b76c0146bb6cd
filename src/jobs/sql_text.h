// SQL text helpers shared by the SQLite and PostgreSQL connectors.
//
// Thread-safety: pure functions.
#pragma once

#include <string>

namespace inferd::jobs {

// "identifier" with inner quotes doubled (both dialects).
inline std::string QuoteIdentifier(const std::string& identifier) {
  std::string q = "\"";
  for (char c : identifier) {
    if (c == '"') q += '"';
    q += c;
  }
  return q + "\"";
}

// A user's query without trailing semicolons and blanks, so it can be wrapped in a sub-select.
inline std::string StripQueryEnd(std::string q) {
  while (!q.empty() && (q.back() == ';' || q.back() == ' ' || q.back() == '\n' || q.back() == '\t' || q.back() == '\r'))
    q.pop_back();
  return q;
}

}  // namespace inferd::jobs
