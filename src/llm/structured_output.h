// Structured outputs: what a request asks its generated text to be, read
// from the request's parameters (front ends pass them through as strings:
// JSON where the API has an object or an array), compiled to a Grammar.
//
//   response_format       OpenAI: {"type": "json_schema", "json_schema": {"name", "schema", "strict"}},
//                         {"type": "json_object"} (llama.cpp: with an optional "schema"), {"type": "text"}
//   guided_json           vLLM: a JSON schema (object, or a string holding one)
//   guided_regex          vLLM: a regular expression (llm/regex_grammar.h)
//   guided_choice         vLLM: an array of strings; the text is one of them
//   guided_grammar        vLLM: a grammar in GBNF (llm/grammar.h)
//   structured_outputs    vLLM (0.10+): {"json" | "regex" | "choice" | "grammar" | "json_object": ...}
//   json_schema, grammar  llama.cpp's server: a JSON schema, a GBNF grammar
//
// At most one may be given. A form the server cannot keep (a schema keyword,
// a regex feature) is INVALID_ARGUMENT naming it.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "core/infer_request.h"
#include "core/status.h"
#include "llm/grammar.h"

namespace inferd::llm {

struct StructuredOutput {
  enum class Kind { kJsonSchema, kJsonObject, kRegex, kChoice, kGrammar };
  Kind kind = Kind::kJsonObject;
  std::string spec;       // the schema (JSON), the regex, the choices (a JSON array), the grammar
  std::string parameter;  // the parameter that asked, for messages

  // A key for caches of compiled grammars: equal for equal requests.
  std::string CacheKey() const;
};

// The structured output the parameters ask for, if any (shape checks only;
// compiling is CompileStructuredOutput's).
Result<std::optional<StructuredOutput>> ParseStructuredOutput(const Parameters& parameters);

// The GBNF text the request compiles to.
Result<std::string> StructuredOutputGbnf(const StructuredOutput& s);

Result<std::shared_ptr<const Grammar>> CompileStructuredOutput(const StructuredOutput& s,
                                                               const GrammarLimits& limits = {});

}  // namespace inferd::llm
