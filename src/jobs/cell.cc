#include "jobs/cell.h"

#include <charconv>

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

}  // namespace inferd::jobs
