#include "jobs/cell.h"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace inferd::jobs {

std::string CellText(const Cell& cell) {
  struct Visitor {
    std::string operator()(std::monostate) const { return ""; }
    std::string operator()(int64_t v) const { return std::to_string(v); }
    std::string operator()(double v) const {
      char buf[32];
      auto r = std::to_chars(buf, buf + sizeof buf, v);  // the shortest text that reads back as v
      return std::string(buf, r.ptr);
    }
    std::string operator()(const std::string& v) const { return v; }
    std::string operator()(const JsonText& v) const { return v.text; }
    std::string operator()(const NumberArray& v) const {
      std::string out = "[";
      for (size_t i = 0; i < v.values.size(); ++i) {
        if (i) out += ',';
        out += (*this)(v.values[i]);
      }
      out += ']';
      return out;
    }
  };
  return std::visit(Visitor{}, cell);
}

std::string JsonString(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::string CellJson(const Cell& cell) {
  if (std::holds_alternative<std::monostate>(cell)) return "null";
  if (const auto* d = std::get_if<double>(&cell)) return std::isfinite(*d) ? CellText(cell) : "null";
  if (const auto* s = std::get_if<std::string>(&cell)) return JsonString(*s);
  return CellText(cell);  // integers, JSON text, NumberArray
}

}  // namespace inferd::jobs
