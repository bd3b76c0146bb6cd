// Structured outputs (llm/structured_output.h): GBNF grammars, regexes and
// JSON schemas as users send them, and the request parameters that carry
// them. The first byte picks the parser.
// Invariants: no crash; every error has a message; what the regex and schema
// translators produce is a grammar ParseGbnf accepts; a grammar that builds
// can be walked: a token the mask allows is accepted byte by byte, one it
// refuses is not, and a finished text allows no token.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "llm/grammar.h"
#include "llm/grammar_matcher.h"
#include "llm/json_schema_grammar.h"
#include "llm/regex_grammar.h"
#include "llm/structured_output.h"

namespace {

using namespace inferd::llm;
using inferd::Result;

const GrammarLimits kLimits{1 << 16, 1 << 14, 64};

const std::vector<std::string>& Vocab() {
  static const std::vector<std::string> v = [] {
    std::vector<std::string> out;
    for (int c = 9; c < 127; ++c) out.emplace_back(1, static_cast<char>(c));
    for (const char* w : {"\xC3", "\xA9", "\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80", "\":", "true", "12", "\"a"}) {
      out.emplace_back(w);
    }
    return out;
  }();
  return v;
}

void Walk(std::shared_ptr<const Grammar> g, uint64_t seed) {
  static const TokenTrie trie(Vocab());
  GrammarMatcher m(std::move(g), GrammarMatcherLimits{1 << 16, 256, 1 << 20});
  GrammarState s = m.Start();
  for (int step = 0; step < 4 && m.health().ok(); ++step) {
    const std::span<const uint64_t> mask = m.Mask(s, trie);
    std::vector<int32_t> allowed;
    for (size_t t = 0; t < Vocab().size(); ++t) {
      if (mask[t / 64] >> (t % 64) & 1) allowed.push_back(static_cast<int32_t>(t));
    }
    if (!m.health().ok()) return;
    if (GrammarMatcher::Finished(s) && !allowed.empty()) std::abort();
    // One refused token (if any) must be refused byte by byte too.
    for (size_t t = seed % Vocab().size(), n = 0; n < Vocab().size(); t = (t + 1) % Vocab().size(), ++n) {
      if (mask[t / 64] >> (t % 64) & 1) continue;
      GrammarState copy = s;
      if (m.AcceptBytes(&copy, Vocab()[t]) && m.health().ok()) std::abort();
      break;
    }
    if (allowed.empty()) return;
    const std::string& tok = Vocab()[static_cast<size_t>(allowed[seed % allowed.size()])];
    if (!m.AcceptBytes(&s, tok) && m.health().ok()) std::abort();
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
  }
}

void MustBuild(const std::string& gbnf, uint64_t seed) {
  Result<Grammar> g = ParseGbnf(gbnf, GrammarLimits{1 << 22, 1 << 22, 1000});
  if (!g.ok()) {
    // The translators' output is always GBNF, though it may outgrow a limit.
    if (g.status().message().find("grows past") == std::string::npos &&
        g.status().message().find("more than") == std::string::npos) {
      std::fprintf(stderr, "%s\n%s\n", g.status().message().c_str(), gbnf.c_str());
      std::abort();
    }
    return;
  }
  if (g->num_symbols() <= (1 << 12)) Walk(std::make_shared<const Grammar>(std::move(*g)), seed);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace inferd::llm;
  using inferd::Result;
  if (size < 1) return 0;
  const uint8_t mode = data[0];
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  const uint64_t seed = size * 2654435761u;
  switch (mode % 5) {
    case 0: {
      Result<Grammar> g = ParseGbnf(text, kLimits);
      if (!g.ok()) {
        if (g.status().message().empty()) std::abort();
        return 0;
      }
      Walk(std::make_shared<const Grammar>(std::move(*g)), seed);
      return 0;
    }
    case 1:
    case 2: {
      Result<std::string> e = RegexToGbnf(text, mode % 5 == 2, 64);
      if (!e.ok()) {
        if (e.status().message().empty()) std::abort();
        return 0;
      }
      MustBuild("root ::= " + *e + "\n", seed);
      return 0;
    }
    case 3: {
      Result<std::string> s = JsonSchemaToGbnf(text);
      if (!s.ok()) {
        if (s.status().message().empty()) std::abort();
        return 0;
      }
      MustBuild(*s, seed);
      return 0;
    }
    default: {
      static const char* kNames[] = {"response_format", "guided_json",        "guided_regex", "guided_choice",
                                     "guided_grammar",  "structured_outputs", "json_schema",  "grammar"};
      inferd::Parameters p;
      p[kNames[(mode / 5) % 8]] = std::string(text);
      auto parsed = ParseStructuredOutput(p);
      if (!parsed.ok()) {
        if (parsed.status().message().empty()) std::abort();
        return 0;
      }
      if (!parsed->has_value()) return 0;
      auto compiled = CompileStructuredOutput(**parsed, kLimits);
      if (!compiled.ok() && compiled.status().message().empty()) std::abort();
      if (compiled.ok()) Walk(*compiled, seed);
      return 0;
    }
  }
}
