// Grammar: a context-free grammar over Unicode code points, the form every
// structured-output request is compiled to (llm/structured_output.h): a JSON
// schema, "any JSON object", a regular expression, a list of choices, or a
// grammar written by the user in GBNF (llama.cpp's notation):
//
//   root   ::= "{" ws pair ("," ws pair)* "}"      # comments run to the line's end
//   pair   ::= [a-z]+ ":" ws ( "true" | "false" )
//   ws     ::= [ \t\n]?
//
// Literals ("..." with \n \t \r \\ \" \xHH \uHHHH \UHHHHHHHH escapes), classes
// ([a-z0-9_], [^"\\], with the same escapes), `.` (any code point), rule
// names, groups, alternatives (|) and the repetitions * + ? {m} {m,} {m,n}.
// A rule ends at the end of its line unless a group is open or the next line
// begins with `|`. The start rule is `root`. Repetitions and groups become
// rules of their own; rules referring to themselves on the left ("x ::= x
// "a" | "b"") are refused, as are undefined rules and grammars past the
// limits (GrammarLimits).
//
// Thread-safety: an immutable value once built; share it freely.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace inferd::llm {

struct CharRange {
  uint32_t lo = 0, hi = 0;  // inclusive
};

// One element of an alternative: a character class, or a reference to a rule.
struct GrammarSymbol {
  int32_t rule = -1;  // >= 0: the rule it refers to; -1: a character class
  bool negated = false;
  std::vector<CharRange> ranges;
};

struct GrammarRule {
  std::string name;
  std::vector<std::vector<GrammarSymbol>> alternatives;  // an empty alternative matches nothing (ε)
};

struct GrammarLimits {
  size_t max_text_bytes = 1 << 20;  // GBNF text, and what a schema or regex compiles to
  size_t max_symbols = 1 << 18;     // elements of all alternatives together
  int32_t max_repeat = 1000;        // m and n of {m,n}
};

// The matcher's flat form: every alternative's symbols end with an end marker.
class Grammar {
 public:
  static constexpr int32_t kEnd = -2;  // Sym::rule of the end of an alternative
  static constexpr int32_t kChars = -1;

  struct Sym {
    int32_t rule = kEnd;  // kEnd, kChars, or a rule
    bool negated = false;
    uint32_t ranges_begin = 0, ranges_end = 0;  // into ranges()
  };

  // Checks (undefined rules, left recursion, size) and flattens `rules`;
  // `root` names the start rule.
  static Result<Grammar> Build(std::vector<GrammarRule> rules, std::string_view root, const GrammarLimits& limits);

  const Sym& sym(uint32_t pos) const { return syms_[pos]; }
  const std::vector<uint32_t>& alternatives(int32_t rule) const { return alts_[static_cast<size_t>(rule)]; }
  int32_t root() const { return root_; }
  size_t num_symbols() const { return syms_.size(); }
  // Whether the character class at `pos` holds code point `c`.
  bool Matches(uint32_t pos, uint32_t c) const;
  // Whether it holds some code point in [lo, hi].
  bool MatchesSome(uint32_t pos, uint32_t lo, uint32_t hi) const;

 private:
  std::vector<Sym> syms_;
  std::vector<CharRange> ranges_;
  std::vector<std::vector<uint32_t>> alts_;  // per rule: the positions where its alternatives begin
  std::vector<std::string> names_;
  int32_t root_ = 0;
};

// GBNF text to a grammar; INVALID_ARGUMENT saying where the text is wrong.
// Fuzzed in fuzz/fuzz_structured_output.cc.
Result<Grammar> ParseGbnf(std::string_view text, const GrammarLimits& limits = {});

// `s` as a GBNF literal ("..." with the escapes it needs).
std::string GbnfLiteral(std::string_view s);

// Helpers of the grammar, regex and schema parsers: the value of 1-8 hex
// digits (nullopt if one is not), and the UTF-8 character at s[*pos] (false
// when the bytes there are not well-formed UTF-8; *pos moves past it).
std::optional<uint32_t> HexValue(std::string_view digits);
// Ranges sorted by their start, overlapping and adjacent ones merged.
std::vector<CharRange> NormalizeRanges(std::vector<CharRange> ranges);
bool NextUtf8(std::string_view s, size_t* pos, uint32_t* cp);

}  // namespace inferd::llm
