// Regular expressions as GBNF (llm/grammar.h), for vLLM's `guided_regex` and
// JSON schema `pattern`s. The text generated matches the whole expression
// (a leading ^ and a trailing $ change nothing; a schema pattern matched as a
// whole is also matched by JSON schema's search semantics).
//
// Supported: literals, escapes (\n \t \r \f \v \0 \xHH \uHHHH, escaped
// punctuation), . (any character but a newline), classes ([a-z], [^...],
// \d \D \w \W \s \S, also inside classes), groups ((...) and (?:...)), |,
// and the quantifiers * + ? {m} {m,} {m,n} (lazy forms as greedy ones).
// Refused with INVALID_ARGUMENT naming the feature: lookaround, back-
// references, named groups, anchors inside the expression, \b \B, flags.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"

namespace inferd::llm {

// A GBNF expression (no rule definitions) for `regex`. With `in_json_string`
// the text is the inside of a JSON string: quotes, backslashes and control
// characters come out escaped, as JSON needs them.
Result<std::string> RegexToGbnf(std::string_view regex, bool in_json_string, int max_repeat = 1000);

}  // namespace inferd::llm
