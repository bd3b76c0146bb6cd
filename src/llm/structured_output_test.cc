// Grammars, their matcher and masks, and what schemas, regexes and choices
// compile to: checked by walking the matcher and by generating random texts
// through the masks (every one must be accepted by the form it came from).
#include "llm/structured_output.h"

#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <cmath>
#include <random>

#include "llm/grammar.h"
#include "llm/grammar_matcher.h"
#include "llm/json_schema_grammar.h"
#include "llm/regex_grammar.h"

namespace inferd::llm {
namespace {

std::shared_ptr<const Grammar> Gbnf(std::string_view text) {
  Result<Grammar> g = ParseGbnf(text);
  EXPECT_TRUE(g.ok()) << g.status().message() << "\n" << text;
  if (!g.ok()) return nullptr;
  return std::make_shared<const Grammar>(std::move(*g));
}

// Whether the whole of `text` is a sentence of the grammar.
bool Accepts(const std::shared_ptr<const Grammar>& g, std::string_view text) {
  GrammarMatcher m(g);
  GrammarState s = m.Start();
  return m.AcceptBytes(&s, text) && GrammarMatcher::Complete(s);
}

bool Prefix(const std::shared_ptr<const Grammar>& g, std::string_view text) {
  GrammarMatcher m(g);
  GrammarState s = m.Start();
  return m.AcceptBytes(&s, text);
}

std::shared_ptr<const Grammar> Schema(std::string_view schema) {
  Result<std::string> text = JsonSchemaToGbnf(schema);
  EXPECT_TRUE(text.ok()) << text.status().message();
  return text.ok() ? Gbnf(*text) : nullptr;
}

// A toy vocabulary: every printable ASCII character, a few words, and the
// bytes of "é" one by one.
std::vector<std::string> Vocabulary() {
  std::vector<std::string> v;
  for (char c = 32; c < 127; ++c) v.emplace_back(1, c);
  for (const char* w : {"\"", "{\"", "\":", "\",\"", "true", "false", "null", "12", "00", " \"", "\n  ", "},{"}) {
    v.emplace_back(w);
  }
  v.emplace_back("\xC3");
  v.emplace_back("\xA9");
  v.emplace_back("\xC3\xA9");
  v.emplace_back("");  // a special token: never allowed
  return v;
}

// Random tokens among those the mask allows until nothing may follow (or a
// length cap). Returns the text, or nullopt when the mask left no token.
std::optional<std::string> Generate(const std::shared_ptr<const Grammar>& g, uint64_t seed, size_t max_tokens = 400) {
  const std::vector<std::string> vocab = Vocabulary();
  TokenTrie trie(vocab);
  GrammarMatcher m(g);
  GrammarState s = m.Start();
  std::mt19937_64 rng(seed);
  std::string out;
  for (size_t n = 0; n < max_tokens; ++n) {
    if (GrammarMatcher::Finished(s)) return out;
    if (GrammarMatcher::Complete(s) && rng() % 8 == 0) return out;  // an end token
    const std::span<const uint64_t> mask = m.Mask(s, trie);
    std::vector<int32_t> allowed;
    for (size_t t = 0; t < vocab.size(); ++t) {
      if (mask[t / 64] >> (t % 64) & 1) allowed.push_back(static_cast<int32_t>(t));
    }
    if (allowed.empty()) return GrammarMatcher::Complete(s) ? std::optional<std::string>(out) : std::nullopt;
    // Prefer closing tokens now and then, so texts end.
    const std::string& tok = vocab[static_cast<size_t>(allowed[rng() % allowed.size()])];
    EXPECT_TRUE(m.AcceptBytes(&s, tok)) << "the mask allowed '" << tok << "' after '" << out << "'";
    out += tok;
  }
  return GrammarMatcher::Complete(s) ? std::optional<std::string>(out) : std::nullopt;
}

TEST(GrammarTest, GbnfAlternativesRepetitionsAndClasses) {
  auto g = Gbnf(R"(root ::= greeting (" " name){1,2} "!"?   # a comment
greeting ::= "hi" | "hello"
name ::= [A-Z] [a-z]*
)");
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(Accepts(g, "hi Ann"));
  EXPECT_TRUE(Accepts(g, "hello Bo Cy!"));
  EXPECT_FALSE(Accepts(g, "hello"));
  EXPECT_FALSE(Accepts(g, "hi ann"));
  EXPECT_FALSE(Accepts(g, "hi A B C"));
  EXPECT_TRUE(Prefix(g, "hel"));
  EXPECT_FALSE(Prefix(g, "hex"));
}

TEST(GrammarTest, GbnfErrorsSayWhere) {
  auto err = [](std::string_view text) {
    Result<Grammar> g = ParseGbnf(text);
    return g.ok() ? std::string("ok") : g.status().message();
  };
  EXPECT_NE(err("root ::= x\n").find("rule 'x' is used but not defined"), std::string::npos);
  EXPECT_NE(err("root ::= root \"a\" | \"b\"\n").find("left-recursive"), std::string::npos);
  EXPECT_NE(err("root ::= x\nx ::= \"c\"? y \"a\"\ny ::= x | \"b\"\n").find("left-recursive"), std::string::npos);
  // A repetition of something that may be empty is no left recursion (regexes write "(a|)*").
  auto empty_loop = Gbnf("root ::= (\"a\"?)* \"b\"\n");
  EXPECT_TRUE(Accepts(empty_loop, "aab"));
  EXPECT_TRUE(Accepts(empty_loop, "b"));
  EXPECT_FALSE(Accepts(empty_loop, "aa"));
  EXPECT_NE(err("root ::= \"a\"\nroot ::= \"b\"\n").find("defined twice"), std::string::npos);
  EXPECT_NE(err("root ::= \"a\n").find("unterminated literal at line 2"), std::string::npos);
  EXPECT_NE(err("root ::= \"a\" ]").find("at line 1, column 14"), std::string::npos);
  EXPECT_NE(err("root ::= [b-a]\n").find("backwards"), std::string::npos);
  EXPECT_NE(err("root ::= \"a\"{5000}\n").find("repetition count"), std::string::npos);
  EXPECT_NE(err("other ::= \"a\"\n").find("no rule 'root'"), std::string::npos);
  EXPECT_NE(err("root ::= \"a\" )\n").find("unexpected"), std::string::npos);
}

TEST(GrammarTest, Utf8CharactersArriveInPieces) {
  auto g = Gbnf("root ::= [a-z\\u00E0-\\u00FF]+\n");
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(Accepts(g, "caf\xC3\xA9"));
  EXPECT_TRUE(Prefix(g, "caf\xC3"));       // half of é: may still become one
  EXPECT_FALSE(Prefix(g, "caf\xE2"));      // begins U+2000..U+2FFF: none allowed
  EXPECT_FALSE(Accepts(g, "caf\xC3"));     // unfinished
  EXPECT_FALSE(Prefix(g, "\x80"));         // a continuation byte first
  EXPECT_FALSE(Prefix(g, "caf\xC1\xA1"));  // an overlong "a"
  auto any = Gbnf("root ::= .*\n");
  EXPECT_FALSE(Prefix(any, "\xED\xA0\x80"));  // a surrogate
  EXPECT_FALSE(Prefix(any, "\xF5"));          // past U+10FFFF
  EXPECT_TRUE(Accepts(any, "\xF0\x9F\x98\x80"));
}

TEST(GrammarTest, MaskEqualsTokenByTokenCheck) {
  auto g = Schema(R"({"type":"object","properties":{"name":{"type":"string","maxLength":5},
                      "tags":{"type":"array","items":{"enum":["a","bc"]},"maxItems":3}},"required":["name"]})");
  ASSERT_NE(g, nullptr);
  const std::vector<std::string> vocab = Vocabulary();
  TokenTrie trie(vocab);
  GrammarMatcher m(g);
  for (std::string prefix : {"", "{", "{\"name\":", "{\"name\": \"ab", "{\"name\":\"x\",\"tags\":[\"a\""}) {
    GrammarState s = m.Start();
    ASSERT_TRUE(m.AcceptBytes(&s, prefix)) << prefix;
    const std::vector<uint64_t> mask(m.Mask(s, trie).begin(), m.Mask(s, trie).end());
    for (size_t t = 0; t < vocab.size(); ++t) {
      GrammarState copy = s;
      const bool ok = !vocab[t].empty() && m.AcceptBytes(&copy, vocab[t]);
      EXPECT_EQ(ok, static_cast<bool>(mask[t / 64] >> (t % 64) & 1))
          << "after '" << prefix << "': '" << vocab[t] << "'";
    }
  }
}

TEST(JsonSchemaGrammarTest, IntegerRangesAreExact) {
  for (auto [lo, hi] : std::vector<std::pair<int, int>>{{0, 0}, {-15, 123}, {7, 1000}, {-300, -20}, {95, 105}}) {
    auto g =
        Schema("{\"type\":\"integer\",\"minimum\":" + std::to_string(lo) + ",\"maximum\":" + std::to_string(hi) + "}");
    ASSERT_NE(g, nullptr);
    for (int v = -400; v <= 1200; ++v) {
      EXPECT_EQ(Accepts(g, std::to_string(v)), v >= lo && v <= hi) << v << " in [" << lo << ", " << hi << "]";
    }
    EXPECT_FALSE(Accepts(g, "007"));
  }
  auto open = Schema(R"({"type":"integer","exclusiveMinimum":3,"exclusiveMaximum":6})");
  EXPECT_FALSE(Accepts(open, "3"));
  EXPECT_TRUE(Accepts(open, "4"));
  EXPECT_TRUE(Accepts(open, "5"));
  EXPECT_FALSE(Accepts(open, "6"));
}

TEST(JsonSchemaGrammarTest, GeneratedNumbersStayWithinBounds) {
  struct Case {
    double lo, hi;
  };
  for (Case c : {Case{0.5, 2.5}, Case{-1.25, 0.75}, Case{0.21, 0.28}, Case{10, 10}, Case{-3.5, -3.1}, Case{0, 1}}) {
    const std::string schema =
        "{\"type\":\"number\",\"minimum\":" + std::to_string(c.lo) + ",\"maximum\":" + std::to_string(c.hi) + "}";
    auto g = Schema(schema);
    ASSERT_NE(g, nullptr);
    for (uint64_t seed = 0; seed < 40; ++seed) {
      std::optional<std::string> text = Generate(g, seed);
      ASSERT_TRUE(text.has_value()) << schema;
      const double v = std::stod(*text);
      EXPECT_GE(v, c.lo) << *text << " " << schema;
      EXPECT_LE(v, c.hi) << *text << " " << schema;
    }
  }
}

TEST(JsonSchemaGrammarTest, GeneratedObjectsHaveTheSchemasShape) {
  auto g = Schema(R"({
    "type": "object",
    "properties": {
      "id": {"type": "integer", "minimum": 1, "maximum": 99},
      "kind": {"enum": ["cat", "dog", 3, null]},
      "size": {"type": "number", "minimum": 0, "maximum": 1},
      "tags": {"type": "array", "items": {"type": "string", "maxLength": 3}, "minItems": 1, "maxItems": 3},
      "owner": {"$ref": "#/$defs/person"},
      "note": {"type": ["string", "null"], "maxLength": 4},
      "when": {"type": "string", "format": "date"}
    },
    "required": ["id", "kind", "tags", "owner"],
    "additionalProperties": false,
    "$defs": {"person": {"type": "object", "properties": {"name": {"type": "string", "pattern": "^[A-Z][a-z]{1,3}$"},
                                                          "ok": {"type": "boolean"}},
                         "required": ["name"]}}
  })");
  ASSERT_NE(g, nullptr);
  int optional_seen = 0;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    std::optional<std::string> text = Generate(g, seed, 2000);
    ASSERT_TRUE(text.has_value()) << seed;
    rapidjson::Document d;
    d.Parse(text->data(), text->size());
    ASSERT_FALSE(d.HasParseError()) << *text;
    ASSERT_TRUE(d.IsObject()) << *text;
    ASSERT_TRUE(d.HasMember("id") && d["id"].IsInt()) << *text;
    EXPECT_GE(d["id"].GetInt(), 1);
    EXPECT_LE(d["id"].GetInt(), 99);
    ASSERT_TRUE(d.HasMember("kind")) << *text;
    ASSERT_TRUE(d["tags"].IsArray()) << *text;
    EXPECT_GE(d["tags"].Size(), 1u);
    EXPECT_LE(d["tags"].Size(), 3u);
    for (const auto& t : d["tags"].GetArray()) EXPECT_TRUE(t.IsString()) << *text;
    ASSERT_TRUE(d["owner"].IsObject() && d["owner"].HasMember("name")) << *text;
    const std::string name = d["owner"]["name"].GetString();
    EXPECT_TRUE(name.size() >= 2 && name.size() <= 4 && std::isupper(static_cast<unsigned char>(name[0]))) << name;
    for (auto m = d.MemberBegin(); m != d.MemberEnd(); ++m) {
      const std::string k = m->name.GetString();
      EXPECT_TRUE(k == "id" || k == "kind" || k == "size" || k == "tags" || k == "owner" || k == "note" || k == "when")
          << k;
    }
    if (d.HasMember("size")) {
      ++optional_seen;
      EXPECT_GE(d["size"].GetDouble(), 0);
      EXPECT_LE(d["size"].GetDouble(), 1);
    }
    if (d.HasMember("when")) EXPECT_EQ(std::string(d["when"].GetString()).size(), 10u) << *text;
  }
  EXPECT_GT(optional_seen, 0);
}

TEST(JsonSchemaGrammarTest, UnsupportedKeywordsAreNamed) {
  auto err = [](std::string_view schema) {
    Result<std::string> r = JsonSchemaToGbnf(schema);
    return r.ok() ? std::string("ok") : r.status().message();
  };
  EXPECT_NE(err(R"({"type":"array","uniqueItems":true})").find("'uniqueItems'"), std::string::npos);
  EXPECT_NE(err(R"({"not":{"type":"string"}})").find("'not'"), std::string::npos);
  EXPECT_NE(err(R"({"type":"string","format":"email"})").find("format 'email'"), std::string::npos);
  EXPECT_NE(err(R"({"type":"number","multipleOf":3})").find("'multipleOf'"), std::string::npos);
  EXPECT_NE(err(R"({"$ref":"http://example.com/s.json"})").find("only local refs"), std::string::npos);
  EXPECT_NE(err(R"({"type":"integer","minimum":5,"maximum":4})").find("no integer"), std::string::npos);
  EXPECT_NE(err(R"({"type":"string","pattern":"(?=a)b"})").find("lookaround"), std::string::npos);
  EXPECT_NE(err("{").find("not valid JSON"), std::string::npos);
  EXPECT_EQ(err(R"({"type":"object","title":"t","description":"d","properties":{}})"), "ok");
}

TEST(JsonSchemaGrammarTest, RecursiveSchemasAndAnyJson) {
  auto tree = Schema(R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},
      "kids":{"type":"array","items":{"$ref":"#/$defs/node"},"maxItems":2}},"required":["v"]}},
      "$ref":"#/$defs/node"})");
  ASSERT_NE(tree, nullptr);
  EXPECT_TRUE(Accepts(tree, R"({"v":1,"kids":[{"v":2},{"v":3,"kids":[]}]})"));
  EXPECT_FALSE(Accepts(tree, R"({"kids":[]})"));
  auto any = Gbnf(AnyJsonObjectGbnf());
  EXPECT_TRUE(Accepts(any, R"( {"a": [1, 2.5e3, "x\n\u00e9", {"b": null}], "c" : true})"));
  EXPECT_FALSE(Accepts(any, "[1]"));
  EXPECT_FALSE(Accepts(any, R"({"a":})"));
}

TEST(RegexGrammarTest, RegexesBecomeGrammars) {
  auto re = [](std::string_view r) {
    Result<std::string> e = RegexToGbnf(r, false);
    EXPECT_TRUE(e.ok()) << e.status().message();
    return Gbnf("root ::= " + (e.ok() ? *e : std::string("\"\"")) + "\n");
  };
  auto phone = re(R"(^\(\d{3}\) \d{3}-\d{4}$)");
  EXPECT_TRUE(Accepts(phone, "(555) 123-4567"));
  EXPECT_FALSE(Accepts(phone, "555-123-4567"));
  auto words = re("(?:cat|dog)s?( [a-c]+)*");
  EXPECT_TRUE(Accepts(words, "cats abc a"));
  EXPECT_FALSE(Accepts(words, "cow"));
  auto dot = re("a.c[^x-z]\\w\\s\\.");
  EXPECT_TRUE(Accepts(dot, "abcq_ ."));
  EXPECT_FALSE(Accepts(dot, "a\ncq_ ."));
  EXPECT_FALSE(Accepts(dot, "abcy_ ."));
  for (std::string_view bad : {"(a)\\1", "a(?<=b)", "\\bword", "a^b", "[[:alpha:]]", "a{3,2}"}) {
    EXPECT_FALSE(RegexToGbnf(bad, false).ok()) << bad;
  }
  // In a JSON string, a quote and a backslash come out escaped.
  Result<std::string> json = RegexToGbnf("a\"[\\\\b]", true);
  ASSERT_TRUE(json.ok()) << json.status().message();
  auto g = Gbnf("root ::= " + *json + "\n");
  EXPECT_TRUE(Accepts(g, "a\\\"\\\\"));
  EXPECT_TRUE(Accepts(g, "a\\\"b"));
  EXPECT_FALSE(Accepts(g, "a\"b"));
}

TEST(StructuredOutputTest, RequestParametersSayWhatToCompile) {
  auto parse = [](Parameters p) { return ParseStructuredOutput(p); };
  auto none = parse({{"response_format", std::string(R"({"type":"text"})")}});
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  auto schema = parse(
      {{"response_format",
        std::string(
            R"({"type":"json_schema","json_schema":{"name":"x","strict":true,"schema":{"type":"object","properties":{"a":{"type":"boolean"}},"required":["a"]}}})")}});
  ASSERT_TRUE(schema.ok()) << schema.status().message();
  ASSERT_TRUE(schema->has_value());
  EXPECT_EQ((*schema)->kind, StructuredOutput::Kind::kJsonSchema);
  auto g = CompileStructuredOutput(**schema);
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_TRUE(Accepts(*g, "{\"a\": true}"));
  auto choice = parse({{"guided_choice", std::string(R"(["yes","no"])")}});
  ASSERT_TRUE(choice.ok() && choice->has_value());
  auto cg = CompileStructuredOutput(**choice);
  ASSERT_TRUE(cg.ok());
  EXPECT_TRUE(Accepts(*cg, "no"));
  EXPECT_FALSE(Accepts(*cg, "maybe"));
  auto vllm = parse({{"structured_outputs", std::string(R"({"regex":"[0-9]{2}"})")}});
  ASSERT_TRUE(vllm.ok() && vllm->has_value());
  EXPECT_EQ((*vllm)->kind, StructuredOutput::Kind::kRegex);
  auto both = parse({{"guided_regex", std::string("a")}, {"guided_json", std::string("{}")}});
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.status().message().find("not both"), std::string::npos);
  EXPECT_FALSE(parse({{"response_format", std::string(R"({"type":"xml"})")}}).ok());
  EXPECT_FALSE(parse({{"guided_choice", std::string("[]")}}).ok());
  EXPECT_FALSE(parse({{"guided_json", int64_t{3}}}).ok());
  auto unsupported = parse({{"guided_json", std::string(R"({"type":"array","contains":{}})")}});
  ASSERT_TRUE(unsupported.ok());
  auto compiled = CompileStructuredOutput(**unsupported);
  ASSERT_FALSE(compiled.ok());
  EXPECT_NE(compiled.status().message().find("guided_json: json schema: the keyword 'contains'"), std::string::npos)
      << compiled.status().message();
}

}  // namespace
}  // namespace inferd::llm
