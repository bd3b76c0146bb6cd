// Cells and rows as batch-job sources read them: a value of a CSV field, a
// JSON Lines member or an SQL column, before it becomes part of a tensor.
//
// Thread-safety: plain values.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace inferd::jobs {

// JSON text: a JSON array or object read from a JSON Lines source, kept as
// its JSON text (an input mapping parses it into a tensor's elements).
struct JsonText {
  std::string text;
};

// A JSON array of numbers only (nested arrays flattened row-major), read
// from a JSON Lines source: its elements go into a tensor without being
// printed and parsed again. Integers are exact (|v| <= 2^53; larger ones
// make the array JSON text instead).
struct NumberArray {
  std::vector<double> values;
};

// NULL, integer, real, text (CSV fields are text), JSON text, or numbers.
using Cell = std::variant<std::monostate, int64_t, double, std::string, JsonText, NumberArray>;

struct Row {
  int64_t ordinal = 0;      // 0-based position in the source: the resume point counts these
  std::vector<Cell> cells;  // one per source column
  // Non-empty: the source could not read this row (a malformed CSV record or
  // JSON line); it becomes a row error with this message.
  std::string error;
};

// The cell as text (the key column's value, error messages): integers in
// decimal, reals as the shortest text that reads back exactly, NULL as "", a NumberArray as a
// (flat) JSON array.
std::string CellText(const Cell& cell);

// `s` as a JSON string (quotes, escapes).
std::string JsonString(std::string_view s);
// The cell as a JSON value: null, a number (non-finite reals as null), a
// string, JSON text as it is, a NumberArray as an array.
std::string CellJson(const Cell& cell);

}  // namespace inferd::jobs
