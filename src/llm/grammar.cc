#include "llm/grammar.h"

#include <algorithm>
#include <unordered_map>

#include "llm/unicode_tables.h"

namespace inferd::llm {
namespace {

constexpr uint32_t kMaxCodePoint = 0x10FFFF;

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

class GbnfParser {
 public:
  GbnfParser(std::string_view text, const GrammarLimits& limits) : t_(text), limits_(limits) {}

  Result<Grammar> Parse() {
    if (t_.size() > limits_.max_text_bytes) {
      return Status::InvalidArgument("grammar: longer than " + std::to_string(limits_.max_text_bytes) + " bytes");
    }
    while (true) {
      SkipSpace(true);
      if (i_ >= t_.size()) break;
      INFERD_RETURN_IF_ERROR(ParseRule());
    }
    for (size_t r = 0; r < rules_.size(); ++r) {
      if (!defined_[r])
        return Status::InvalidArgument("grammar: rule '" + rules_[r].name + "' is used but not defined");
    }
    return Grammar::Build(std::move(rules_), "root", limits_);
  }

 private:
  Status Error(std::string_view what) const {
    size_t line = 1, col = 1;
    for (size_t k = 0; k < i_ && k < t_.size(); ++k) {
      if (t_[k] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    return Status::InvalidArgument("grammar: " + std::string(what) + " at line " + std::to_string(line) + ", column " +
                                   std::to_string(col));
  }

  char Peek() const { return i_ < t_.size() ? t_[i_] : '\0'; }

  void SkipSpace(bool newlines) {
    while (i_ < t_.size()) {
      const char c = t_[i_];
      if (c == ' ' || c == '\t' || c == '\r' || (newlines && c == '\n')) {
        ++i_;
      } else if (c == '#') {
        while (i_ < t_.size() && t_[i_] != '\n') ++i_;
      } else {
        break;
      }
    }
  }

  int32_t RuleId(std::string_view name) {
    auto it = ids_.find(std::string(name));
    if (it != ids_.end()) return it->second;
    const auto id = static_cast<int32_t>(rules_.size());
    rules_.push_back({std::string(name), {}});
    defined_.push_back(false);
    ids_.emplace(std::string(name), id);
    return id;
  }

  int32_t NewRule(int32_t parent) {
    const std::string name = rules_[static_cast<size_t>(parent)].name + "-" + std::to_string(++synthesized_);
    const int32_t id = RuleId(name);
    defined_[static_cast<size_t>(id)] = true;
    return id;
  }

  Status Count(size_t n) {
    symbols_ += n;
    if (symbols_ > limits_.max_symbols) {
      return Error("the grammar grows past " + std::to_string(limits_.max_symbols) + " elements");
    }
    return Status::OK();
  }

  Status ParseRule() {
    const size_t start = i_;
    while (i_ < t_.size() && IsNameChar(t_[i_])) ++i_;
    if (i_ == start) return Error("expected a rule name");
    const std::string_view name = t_.substr(start, i_ - start);
    SkipSpace(false);
    if (t_.substr(i_, 3) != "::=") return Error("expected ::= after the rule name");
    i_ += 3;
    SkipSpace(true);
    const int32_t id = RuleId(name);
    if (defined_[static_cast<size_t>(id)]) return Error("rule '" + std::string(name) + "' is defined twice");
    defined_[static_cast<size_t>(id)] = true;
    current_ = id;
    std::vector<std::vector<GrammarSymbol>> alts;
    INFERD_RETURN_IF_ERROR(ParseAlternatives(false, &alts));
    rules_[static_cast<size_t>(id)].alternatives = std::move(alts);
    SkipSpace(false);
    if (i_ < t_.size() && t_[i_] != '\n') return Error("unexpected '" + std::string(1, t_[i_]) + "'");
    return Status::OK();
  }

  Status ParseAlternatives(bool nested, std::vector<std::vector<GrammarSymbol>>* out) {
    if (++depth_ > 64) return Error("groups nest deeper than 64");
    while (true) {
      std::vector<GrammarSymbol> seq;
      INFERD_RETURN_IF_ERROR(ParseSequence(nested, &seq));
      out->push_back(std::move(seq));
      SkipSpace(nested);
      if (Peek() == '|') {
        ++i_;
        SkipSpace(true);
        continue;
      }
      if (!nested) {  // an alternative may continue on the next line, beginning with |
        const size_t save = i_;
        SkipSpace(true);
        if (Peek() == '|') {
          ++i_;
          SkipSpace(true);
          continue;
        }
        i_ = save;
      }
      break;
    }
    --depth_;
    return Status::OK();
  }

  Result<uint32_t> CodePoint() {
    if (i_ >= t_.size()) return Error("unexpected end of the grammar");
    const unsigned char c = static_cast<unsigned char>(t_[i_]);
    if (c == '\\') {
      if (i_ + 1 >= t_.size()) return Error("unfinished escape");
      const char e = t_[i_ + 1];
      i_ += 2;
      auto hex = [&](size_t n) -> Result<uint32_t> {
        const std::optional<uint32_t> v = i_ + n <= t_.size() ? HexValue(t_.substr(i_, n)) : std::nullopt;
        if (!v) return Error("a bad or unfinished hex escape");
        if (*v > kMaxCodePoint) return Error("an escape past U+10FFFF");
        i_ += n;
        return *v;
      };
      switch (e) {
        case 'n':
          return uint32_t{'\n'};
        case 'r':
          return uint32_t{'\r'};
        case 't':
          return uint32_t{'\t'};
        case 'x':
          return hex(2);
        case 'u':
          return hex(4);
        case 'U':
          return hex(8);
        default:
          if (static_cast<unsigned char>(e) < 0x80 && !IsNameChar(e)) return uint32_t{static_cast<unsigned char>(e)};
          return Error("unknown escape \\" + std::string(1, e));
      }
    }
    uint32_t cp = 0;
    if (!NextUtf8(t_, &i_, &cp)) return Error("invalid UTF-8");
    return cp;
  }

  Status ParseSequence(bool nested, std::vector<GrammarSymbol>* seq) {
    size_t last = seq->size();  // where the last element begins (a literal is one element)
    bool have_last = false;
    while (true) {
      SkipSpace(nested);
      const char c = Peek();
      if (c == '"') {
        ++i_;
        last = seq->size();
        while (Peek() != '"') {
          if (i_ >= t_.size()) return Error("unterminated literal");
          INFERD_ASSIGN_OR_RETURN(uint32_t cp, CodePoint());
          seq->push_back({-1, false, {{cp, cp}}});
          INFERD_RETURN_IF_ERROR(Count(1));
        }
        ++i_;
        have_last = seq->size() > last;
      } else if (c == '[') {
        ++i_;
        GrammarSymbol s;
        if (Peek() == '^') {
          s.negated = true;
          ++i_;
        }
        while (Peek() != ']') {
          if (i_ >= t_.size()) return Error("unterminated character class");
          INFERD_ASSIGN_OR_RETURN(uint32_t lo, CodePoint());
          uint32_t hi = lo;
          if (Peek() == '-' && i_ + 1 < t_.size() && t_[i_ + 1] != ']') {
            ++i_;
            INFERD_ASSIGN_OR_RETURN(hi, CodePoint());
            if (hi < lo) return Error("a character range runs backwards");
          }
          s.ranges.push_back({lo, hi});
        }
        ++i_;
        last = seq->size();
        seq->push_back(std::move(s));
        INFERD_RETURN_IF_ERROR(Count(1));
        have_last = true;
      } else if (c == '.') {
        ++i_;
        last = seq->size();
        seq->push_back({-1, false, {{0, kMaxCodePoint}}});
        INFERD_RETURN_IF_ERROR(Count(1));
        have_last = true;
      } else if (IsNameChar(c)) {
        const size_t start = i_;
        while (i_ < t_.size() && IsNameChar(t_[i_])) ++i_;
        const std::string_view name = t_.substr(start, i_ - start);
        last = seq->size();
        seq->push_back({RuleId(name), false, {}});
        INFERD_RETURN_IF_ERROR(Count(1));
        have_last = true;
      } else if (c == '(') {
        ++i_;
        SkipSpace(true);
        const int32_t id = NewRule(current_);
        std::vector<std::vector<GrammarSymbol>> alts;
        INFERD_RETURN_IF_ERROR(ParseAlternatives(true, &alts));
        rules_[static_cast<size_t>(id)].alternatives = std::move(alts);
        SkipSpace(true);
        if (Peek() != ')') return Error("expected )");
        ++i_;
        last = seq->size();
        seq->push_back({id, false, {}});
        INFERD_RETURN_IF_ERROR(Count(1));
        have_last = true;
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (!have_last) return Error(std::string("'") + c + "' follows nothing");
        ++i_;
        int64_t m = 0, n = -1;  // n < 0: unbounded
        if (c == '+') m = 1;
        if (c == '?') n = 1;
        if (c == '{') {
          SkipSpace(nested);
          INFERD_ASSIGN_OR_RETURN(m, Number());
          SkipSpace(nested);
          n = m;
          if (Peek() == ',') {
            ++i_;
            SkipSpace(nested);
            n = -1;
            if (Peek() != '}') {
              INFERD_ASSIGN_OR_RETURN(n, Number());
              SkipSpace(nested);
            }
          }
          if (Peek() != '}') return Error("expected }");
          ++i_;
          if (n >= 0 && n < m) return Error("{m,n} with n < m");
          if (m > limits_.max_repeat || n > limits_.max_repeat) {
            return Error("a repetition count past " + std::to_string(limits_.max_repeat));
          }
        }
        std::vector<GrammarSymbol> item(seq->begin() + static_cast<std::ptrdiff_t>(last), seq->end());
        seq->resize(last);
        INFERD_RETURN_IF_ERROR(Repeat(item, m, n, seq));
        have_last = false;  // x** is not meaningful
      } else {
        return Status::OK();
      }
    }
  }

  Result<int64_t> Number() {
    const size_t start = i_;
    int64_t v = 0;
    while (i_ < t_.size() && t_[i_] >= '0' && t_[i_] <= '9' && i_ - start < 9) v = v * 10 + (t_[i_++] - '0');
    if (i_ == start) return Error("expected a number");
    return v;
  }

  // `item` m times, then up to n - m more (n < 0: any number more).
  Status Repeat(const std::vector<GrammarSymbol>& item, int64_t m, int64_t n, std::vector<GrammarSymbol>* seq) {
    INFERD_RETURN_IF_ERROR(Count(item.size() * static_cast<size_t>(m)));
    for (int64_t k = 0; k < m; ++k) seq->insert(seq->end(), item.begin(), item.end());
    if (n < 0) {  // R ::= item R | ε
      const int32_t r = NewRule(current_);
      std::vector<GrammarSymbol> again = item;
      again.push_back({r, false, {}});
      rules_[static_cast<size_t>(r)].alternatives = {std::move(again), {}};
      INFERD_RETURN_IF_ERROR(Count(item.size() + 1));
      seq->push_back({r, false, {}});
      return Status::OK();
    }
    int32_t tail = -1;  // R_k ::= item R_{k-1} | ε
    for (int64_t k = m; k < n; ++k) {
      const int32_t r = NewRule(current_);
      std::vector<GrammarSymbol> once = item;
      if (tail >= 0) once.push_back({tail, false, {}});
      rules_[static_cast<size_t>(r)].alternatives = {std::move(once), {}};
      INFERD_RETURN_IF_ERROR(Count(item.size() + 1));
      tail = r;
    }
    if (tail >= 0) seq->push_back({tail, false, {}});
    return Status::OK();
  }

  std::string_view t_;
  GrammarLimits limits_;
  size_t i_ = 0;
  size_t symbols_ = 0;
  int depth_ = 0;
  int synthesized_ = 0;
  int32_t current_ = 0;
  std::vector<GrammarRule> rules_;
  std::vector<bool> defined_;
  std::unordered_map<std::string, int32_t> ids_;
};

}  // namespace

Result<Grammar> Grammar::Build(std::vector<GrammarRule> rules, std::string_view root, const GrammarLimits& limits) {
  Grammar g;
  g.root_ = -1;
  for (size_t r = 0; r < rules.size(); ++r) {
    if (rules[r].name == root) g.root_ = static_cast<int32_t>(r);
  }
  if (g.root_ < 0) return Status::InvalidArgument("grammar: no rule '" + std::string(root) + "'");
  const size_t n = rules.size();
  size_t total = 0;
  for (const GrammarRule& r : rules) {
    for (const auto& alt : r.alternatives) {
      total += alt.size() + 1;
      for (const GrammarSymbol& s : alt) {
        if (s.rule >= static_cast<int32_t>(n)) return Status::InvalidArgument("grammar: a reference to no rule");
      }
    }
  }
  if (total > limits.max_symbols) {
    return Status::InvalidArgument("grammar: more than " + std::to_string(limits.max_symbols) + " elements");
  }
  // Which rules may match the empty text, then which rules a rule may begin
  // with (after nullable ones): a cycle there is left recursion, which the
  // matcher would expand forever.
  std::vector<char> nullable(n, 0);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n; ++r) {
      if (nullable[r]) continue;
      for (const auto& alt : rules[r].alternatives) {
        bool all = true;
        for (const GrammarSymbol& s : alt) {
          if (s.rule < 0 || !nullable[static_cast<size_t>(s.rule)]) {
            all = false;
            break;
          }
        }
        if (all) {
          nullable[r] = 1;
          changed = true;
          break;
        }
      }
    }
  }
  // Edges r -> s: s may begin r (after nullable symbols); `tail` when s is
  // the last symbol of its alternative. The matcher expands a tail reference
  // without growing the stack, and stops at a position it has expanded, so a
  // cycle of tail edges ("x ::= y x | ..." with y nullable: a repetition of
  // something that may be empty) is harmless; a cycle through any other edge
  // (left recursion) would grow the stack forever and is refused.
  struct Edge {
    int32_t to;
    bool tail;
  };
  std::vector<std::vector<Edge>> first(n);
  for (size_t r = 0; r < n; ++r) {
    for (const auto& alt : rules[r].alternatives) {
      for (size_t k = 0; k < alt.size(); ++k) {
        const GrammarSymbol& s = alt[k];
        if (s.rule < 0) break;
        first[r].push_back({s.rule, k + 1 == alt.size()});
        if (!nullable[static_cast<size_t>(s.rule)]) break;
      }
    }
  }
  // Strongly connected components (Tarjan's, iterative).
  std::vector<int32_t> index(n, -1), low(n, 0), comp(n, -1);
  std::vector<char> on_stack(n, 0);
  std::vector<int32_t> stack;
  int32_t counter = 0, comps = 0;
  for (size_t root = 0; root < n; ++root) {
    if (index[root] >= 0) continue;
    std::vector<std::pair<int32_t, size_t>> call{{static_cast<int32_t>(root), 0}};
    index[root] = low[root] = counter++;
    stack.push_back(static_cast<int32_t>(root));
    on_stack[root] = 1;
    while (!call.empty()) {
      auto& [v, k] = call.back();
      const auto vi = static_cast<size_t>(v);
      if (k < first[vi].size()) {
        const auto w = static_cast<size_t>(first[vi][k++].to);
        if (index[w] < 0) {
          index[w] = low[w] = counter++;
          stack.push_back(static_cast<int32_t>(w));
          on_stack[w] = 1;
          call.emplace_back(static_cast<int32_t>(w), 0);
        } else if (on_stack[w]) {
          low[vi] = std::min(low[vi], index[w]);
        }
        continue;
      }
      if (low[vi] == index[vi]) {
        while (true) {
          const auto w = static_cast<size_t>(stack.back());
          stack.pop_back();
          on_stack[w] = 0;
          comp[w] = comps;
          if (w == vi) break;
        }
        ++comps;
      }
      const int32_t done = v;
      call.pop_back();
      if (!call.empty()) {
        const auto parent = static_cast<size_t>(call.back().first);
        low[parent] = std::min(low[parent], low[static_cast<size_t>(done)]);
      }
    }
  }
  for (size_t r = 0; r < n; ++r) {
    for (const Edge& e : first[r]) {
      if (!e.tail && comp[r] == comp[static_cast<size_t>(e.to)]) {
        return Status::InvalidArgument("grammar: rule '" + rules[r].name +
                                       "' is left-recursive (it can reach itself before reading a character)");
      }
    }
  }
  g.alts_.resize(n);
  g.syms_.reserve(total);
  for (size_t r = 0; r < n; ++r) {
    g.names_.push_back(rules[r].name);
    for (auto& alt : rules[r].alternatives) {
      g.alts_[r].push_back(static_cast<uint32_t>(g.syms_.size()));
      for (GrammarSymbol& s : alt) {
        Sym y;
        y.rule = s.rule >= 0 ? s.rule : kChars;
        y.negated = s.negated;
        if (s.rule < 0) {
          std::vector<CharRange> merged = NormalizeRanges(std::move(s.ranges));
          y.ranges_begin = static_cast<uint32_t>(g.ranges_.size());
          g.ranges_.insert(g.ranges_.end(), merged.begin(), merged.end());
          y.ranges_end = static_cast<uint32_t>(g.ranges_.size());
        }
        g.syms_.push_back(y);
      }
      g.syms_.push_back(Sym{});
    }
  }
  return g;
}

bool Grammar::Matches(uint32_t pos, uint32_t c) const {
  const Sym& s = syms_[pos];
  bool in = false;
  for (uint32_t k = s.ranges_begin; k < s.ranges_end; ++k) {
    if (c < ranges_[k].lo) break;
    if (c <= ranges_[k].hi) {
      in = true;
      break;
    }
  }
  return in != s.negated;
}

bool Grammar::MatchesSome(uint32_t pos, uint32_t lo, uint32_t hi) const {
  const Sym& s = syms_[pos];
  if (!s.negated) {
    for (uint32_t k = s.ranges_begin; k < s.ranges_end; ++k) {
      if (ranges_[k].lo <= hi && lo <= ranges_[k].hi) return true;
    }
    return false;
  }
  // Negated: some code point of [lo, hi] outside every range (they are sorted and merged).
  uint32_t next = lo;
  for (uint32_t k = s.ranges_begin; k < s.ranges_end; ++k) {
    if (ranges_[k].hi < next) continue;
    if (ranges_[k].lo > next) return true;
    if (ranges_[k].hi >= hi) return false;
    next = ranges_[k].hi + 1;
  }
  return next <= hi;
}

Result<Grammar> ParseGbnf(std::string_view text, const GrammarLimits& limits) {
  return GbnfParser(text, limits).Parse();
}

std::vector<CharRange> NormalizeRanges(std::vector<CharRange> r) {
  std::sort(r.begin(), r.end(), [](const CharRange& a, const CharRange& b) { return a.lo < b.lo; });
  std::vector<CharRange> out;
  for (const CharRange& x : r) {
    if (!out.empty() && x.lo <= out.back().hi + 1) {
      out.back().hi = std::max(out.back().hi, x.hi);
    } else {
      out.push_back(x);
    }
  }
  return out;
}

std::optional<uint32_t> HexValue(std::string_view digits) {
  if (digits.empty() || digits.size() > 8) return std::nullopt;
  uint32_t v = 0;
  for (char h : digits) {
    const int d = h >= '0' && h <= '9'   ? h - '0'
                  : h >= 'a' && h <= 'f' ? h - 'a' + 10
                  : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                         : -1;
    if (d < 0) return std::nullopt;
    v = v * 16 + static_cast<uint32_t>(d);
  }
  return v;
}

bool NextUtf8(std::string_view s, size_t* pos, uint32_t* cp) {
  size_t p = *pos;
  const char32_t c = NextCodePoint(s, &p);
  // NextCodePoint answers U+FFFD for bad bytes; a real U+FFFD is spelt EF BF BD.
  if (c == 0xFFFD && s.compare(*pos, 3, "\xEF\xBF\xBD") != 0) return false;
  *pos = p;
  *cp = static_cast<uint32_t>(c);
  return true;
}

std::string GbnfLiteral(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7F) {
      static const char* kHex = "0123456789ABCDEF";
      out += "\\x";
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  out.push_back('"');
  return out;
}

}  // namespace inferd::llm
