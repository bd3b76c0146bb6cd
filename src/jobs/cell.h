// Cells and rows as batch-job sources read them: a value of a CSV field, a
// JSON Lines member or an SQL column, before it becomes part of a tensor.
//
// Thread-safety: plain values.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace inferd::jobs {

// JSON text: a JSON array or object read from a JSON Lines source, kept as
// its JSON text (an input mapping parses it into a tensor's elements).
struct JsonText {
  std::string text;
};

// NULL, integer, real, text (CSV fields are text), or JSON text.
using Cell = std::variant<std::monostate, int64_t, double, std::string, JsonText>;

struct Row {
  int64_t ordinal = 0;      // 0-based position in the source: the resume point counts these
  std::vector<Cell> cells;  // one per source column
  // Non-empty: the source could not read this row (a malformed CSV record or
  // JSON line); it becomes a row error with this message.
  std::string error;
};

// The cell as text (the key column's value, error messages): integers in
// decimal, reals with 17 significant digits, NULL as "".
std::string CellText(const Cell& cell);

}  // namespace inferd::jobs
