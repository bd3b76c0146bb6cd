#include "llm/regex_grammar.h"

#include <algorithm>
#include <vector>

#include "llm/grammar.h"
#include "llm/unicode_tables.h"

namespace inferd::llm {
namespace {

constexpr uint32_t kMax = 0x10FFFF;

std::vector<CharRange> Complement(const std::vector<CharRange>& in) {
  std::vector<CharRange> out;
  uint32_t next = 0;
  for (const CharRange& r : NormalizeRanges(in)) {
    if (r.lo > next) out.push_back({next, r.lo - 1});
    next = r.hi + 1;
  }
  if (next <= kMax) out.push_back({next, kMax});
  return out;
}

std::vector<CharRange> Subtract(const std::vector<CharRange>& a, const std::vector<CharRange>& b) {
  std::vector<CharRange> out;
  const std::vector<CharRange> keep = Complement(b);
  for (const CharRange& x : NormalizeRanges(a)) {
    for (const CharRange& k : keep) {
      const uint32_t lo = std::max(x.lo, k.lo), hi = std::min(x.hi, k.hi);
      if (lo <= hi) out.push_back({lo, hi});
    }
  }
  return out;
}

void AppendCodePoint(std::string* out, uint32_t c) {
  static const char* kHex = "0123456789ABCDEF";
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) {
    out->push_back(static_cast<char>(c));
    return;
  }
  int digits = 8;
  if (c <= 0xFF) {
    out->append("\\x");
    digits = 2;
  } else if (c <= 0xFFFF) {
    out->append("\\u");
    digits = 4;
  } else {
    out->append("\\U");
  }
  for (int k = digits - 1; k >= 0; --k) out->push_back(kHex[(c >> (4 * k)) & 15]);
}

std::string ClassGbnf(const std::vector<CharRange>& ranges) {
  std::string out = "[";
  for (const CharRange& r : NormalizeRanges(ranges)) {
    AppendCodePoint(&out, r.lo);
    if (r.hi != r.lo) {
      out.push_back('-');
      AppendCodePoint(&out, r.hi);
    }
  }
  out.push_back(']');
  return out;
}

const std::vector<CharRange> kDigit = {{'0', '9'}};
const std::vector<CharRange> kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
const std::vector<CharRange> kSpace = {{'\t', '\r'}, {' ', ' '}};
// What a JSON string holds only escaped.
const std::vector<CharRange> kJsonEscaped = {{0, 0x1F}, {'"', '"'}, {'\\', '\\'}};

class RegexParser {
 public:
  RegexParser(std::string_view re, bool json, int max_repeat) : re_(re), json_(json), max_repeat_(max_repeat) {}

  Result<std::string> Parse() {
    if (re_.size() > 16384) return Status::InvalidArgument("regex: longer than 16384 bytes");
    if (!re_.empty() && re_.front() == '^') ++i_;
    size_t end = re_.size();
    if (end > i_ && re_[end - 1] == '$' && (end < 2 || re_[end - 2] != '\\')) --end;
    re_ = re_.substr(0, end);
    INFERD_ASSIGN_OR_RETURN(std::string e, Alternatives());
    if (i_ < re_.size()) return Error("an unmatched )");
    return e;
  }

 private:
  Status Error(std::string_view what) const {
    return Status::InvalidArgument("regex: " + std::string(what) + " (at offset " + std::to_string(i_) +
                                   ") is not supported");
  }

  Result<std::string> Alternatives() {
    if (++depth_ > 64) return Error("nesting deeper than 64");
    std::string out = "(";
    while (true) {
      INFERD_ASSIGN_OR_RETURN(std::string seq, Sequence());
      out += seq.empty() ? "\"\"" : seq;
      if (i_ < re_.size() && re_[i_] == '|') {
        ++i_;
        out += " | ";
        continue;
      }
      break;
    }
    --depth_;
    return out + ")";
  }

  Result<std::string> Sequence() {
    std::string out;
    while (i_ < re_.size() && re_[i_] != '|' && re_[i_] != ')') {
      INFERD_ASSIGN_OR_RETURN(std::string atom, Atom());
      INFERD_ASSIGN_OR_RETURN(std::string q, Quantifier());
      if (!out.empty()) out.push_back(' ');
      out += q.empty() ? atom : "(" + atom + ")" + q;
    }
    return out;
  }

  Result<std::string> Quantifier() {
    if (i_ >= re_.size()) return std::string();
    const char c = re_[i_];
    std::string q;
    if (c == '*' || c == '+' || c == '?') {
      q = std::string(1, c);
      ++i_;
    } else if (c == '{') {
      const size_t close = re_.find('}', i_);
      if (close == std::string_view::npos) return Error("an unclosed {");
      const std::string_view body = re_.substr(i_ + 1, close - i_ - 1);
      int m = 0, n = -1;
      const size_t comma = body.find(',');
      auto num = [&](std::string_view s, int* v) {
        if (s.empty() || s.size() > 6) return false;
        *v = 0;
        for (char d : s) {
          if (d < '0' || d > '9') return false;
          *v = *v * 10 + (d - '0');
        }
        return true;
      };
      if (comma == std::string_view::npos) {
        if (!num(body, &m)) return Error("a malformed {m,n}");
        n = m;
      } else {
        if (!num(body.substr(0, comma), &m)) return Error("a malformed {m,n}");
        if (comma + 1 < body.size() && !num(body.substr(comma + 1), &n)) return Error("a malformed {m,n}");
      }
      if ((n >= 0 && n < m) || m > max_repeat_ || n > max_repeat_) {
        return Error("a repetition count past " + std::to_string(max_repeat_) + " or backwards");
      }
      q = "{" + std::to_string(m) + (comma == std::string_view::npos ? "" : ",") +
          (n >= 0 && comma != std::string_view::npos ? std::to_string(n) : "") + "}";
      i_ = close + 1;
    } else {
      return std::string();
    }
    if (i_ < re_.size() && re_[i_] == '?') ++i_;  // lazy: the same language
    if (i_ < re_.size() && (re_[i_] == '*' || re_[i_] == '+' || re_[i_] == '{')) {
      return Error("a quantifier after a quantifier (possessive)");
    }
    return q;
  }

  // One character as a GBNF piece.
  std::string Char(uint32_t c) {
    if (json_) {
      if (c == '"') return "\"\\\\\\\"\"";   // \"
      if (c == '\\') return "\"\\\\\\\\\"";  // \\ (escaped)
      if (c < 0x20) {
        static const char* kHex = "0123456789abcdef";
        std::string esc = c == '\n'   ? "\\n"
                          : c == '\t' ? "\\t"
                          : c == '\r' ? "\\r"
                                      : std::string("\\u00") + kHex[c >> 4] + kHex[c & 15];
        return GbnfLiteral(esc);
      }
    }
    std::string s;
    AppendUtf8(&s, static_cast<char32_t>(c));
    return GbnfLiteral(s);
  }

  std::string Class(std::vector<CharRange> ranges) {
    if (!json_) return ClassGbnf(ranges);
    // Inside a JSON string: the plain characters, plus the escapes of those that need one.
    std::vector<std::string> parts;
    const std::vector<CharRange> plain = Subtract(ranges, kJsonEscaped);
    if (!plain.empty()) parts.push_back(ClassGbnf(plain));
    for (const CharRange& r : NormalizeRanges(ranges)) {
      for (uint32_t c = r.lo; c <= std::min<uint32_t>(r.hi, 0x5C); ++c) {
        if (c < 0x20 || c == '"' || c == '\\') parts.push_back(Char(c));
      }
    }
    if (parts.empty()) return "[^\\x00-\\U0010FFFF]";  // nothing
    if (parts.size() == 1) return parts[0];
    std::string out = "(";
    for (size_t k = 0; k < parts.size(); ++k) out += (k ? " | " : "") + parts[k];
    return out + ")";
  }

  Result<uint32_t> Utf8() {
    uint32_t cp = 0;
    if (!NextUtf8(re_, &i_, &cp)) return Error("invalid UTF-8");
    return cp;
  }

  Result<uint32_t> Hex(size_t n) {
    const std::optional<uint32_t> v = i_ + n <= re_.size() ? HexValue(re_.substr(i_, n)) : std::nullopt;
    if (!v) return Error("a bad hex escape");
    i_ += n;
    return *v;
  }

  // After a backslash: a class (\d...) into `ranges`, or one character.
  Result<std::vector<CharRange>> Escape(bool in_class) {
    if (i_ >= re_.size()) return Error("a trailing backslash");
    const char e = re_[i_++];
    switch (e) {
      case 'd':
        return kDigit;
      case 'D':
        return Complement(kDigit);
      case 'w':
        return kWord;
      case 'W':
        return Complement(kWord);
      case 's':
        return kSpace;
      case 'S':
        return Complement(kSpace);
      case 'n':
        return std::vector<CharRange>{{'\n', '\n'}};
      case 't':
        return std::vector<CharRange>{{'\t', '\t'}};
      case 'r':
        return std::vector<CharRange>{{'\r', '\r'}};
      case 'f':
        return std::vector<CharRange>{{'\f', '\f'}};
      case 'v':
        return std::vector<CharRange>{{'\v', '\v'}};
      case '0':
        return std::vector<CharRange>{{0, 0}};
      case 'x': {
        INFERD_ASSIGN_OR_RETURN(uint32_t v, Hex(2));
        return std::vector<CharRange>{{v, v}};
      }
      case 'u': {
        INFERD_ASSIGN_OR_RETURN(uint32_t v, Hex(4));
        return std::vector<CharRange>{{v, v}};
      }
      case 'b':
        if (in_class) return std::vector<CharRange>{{'\b', '\b'}};
        return Error("a word boundary \\b");
      default:
        if (e >= '1' && e <= '9') return Error("a backreference");
        if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z')) return Error(std::string("the escape \\") + e);
        return std::vector<CharRange>{{static_cast<unsigned char>(e), static_cast<unsigned char>(e)}};
    }
  }

  Result<std::string> Atom() {
    const char c = re_[i_];
    if (c == '(') {
      ++i_;
      if (re_.substr(i_, 2) == "?:") {
        i_ += 2;
      } else if (i_ < re_.size() && re_[i_] == '?') {
        return Error("a lookaround, named group or inline flag (?...)");
      }
      INFERD_ASSIGN_OR_RETURN(std::string inner, Alternatives());
      if (i_ >= re_.size() || re_[i_] != ')') return Error("an unclosed (");
      ++i_;
      return inner;
    }
    if (c == '[') return ClassAtom();
    if (c == '.') {
      ++i_;
      return Class(Complement({{'\n', '\n'}}));
    }
    if (c == '\\') {
      ++i_;
      INFERD_ASSIGN_OR_RETURN(auto ranges, Escape(false));
      if (ranges.size() == 1 && ranges[0].lo == ranges[0].hi) return Char(ranges[0].lo);
      return Class(ranges);
    }
    if (c == '^' || c == '$') return Error("an anchor inside the expression");
    if (c == '*' || c == '+' || c == '?' || c == '{') return Error(std::string("'") + c + "' following nothing");
    INFERD_ASSIGN_OR_RETURN(uint32_t cp, Utf8());
    return Char(cp);
  }

  Result<std::string> ClassAtom() {
    ++i_;
    bool negated = false;
    if (i_ < re_.size() && re_[i_] == '^') {
      negated = true;
      ++i_;
    }
    std::vector<CharRange> ranges;
    bool first = true;
    while (true) {
      if (i_ >= re_.size()) return Error("an unclosed [");
      if (re_[i_] == ']' && !first) break;
      first = false;
      if (re_.substr(i_, 2) == "[:") return Error("a POSIX class [:...:]");
      std::vector<CharRange> item;
      if (re_[i_] == '\\') {
        ++i_;
        INFERD_ASSIGN_OR_RETURN(item, Escape(true));
      } else {
        INFERD_ASSIGN_OR_RETURN(uint32_t cp, Utf8());
        item = {{cp, cp}};
      }
      if (item.size() == 1 && item[0].lo == item[0].hi && i_ + 1 < re_.size() && re_[i_] == '-' && re_[i_ + 1] != ']') {
        ++i_;
        uint32_t hi = 0;
        if (re_[i_] == '\\') {
          ++i_;
          INFERD_ASSIGN_OR_RETURN(auto h, Escape(true));
          if (h.size() != 1 || h[0].lo != h[0].hi) return Error("a class as the end of a range");
          hi = h[0].lo;
        } else {
          INFERD_ASSIGN_OR_RETURN(hi, Utf8());
        }
        if (hi < item[0].lo) return Error("a range running backwards");
        item[0].hi = hi;
      }
      ranges.insert(ranges.end(), item.begin(), item.end());
    }
    ++i_;
    return Class(negated ? Complement(ranges) : ranges);
  }

  std::string_view re_;
  bool json_;
  int max_repeat_;
  size_t i_ = 0;
  int depth_ = 0;
};

}  // namespace

Result<std::string> RegexToGbnf(std::string_view regex, bool in_json_string, int max_repeat) {
  return RegexParser(regex, in_json_string, max_repeat).Parse();
}

}  // namespace inferd::llm
