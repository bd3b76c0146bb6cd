// JSON schemas as GBNF (llm/grammar.h): the grammar of the JSON texts the
// schema accepts, or of a well-chosen part of them (every text it generates
// validates; a few valid texts are never generated, see below).
//
// Supported (draft 2020-12 and draft 7 spellings):
//   type (one, or a list), enum, const, anyOf / oneOf (as alternatives),
//   allOf of one schema, $ref to "#", "#/$defs/..." or "#/definitions/..."
//   (recursion included), nullable (OpenAPI);
//   objects: properties (generated in the schema's order), required,
//     additionalProperties (false, true, or a schema for objects without
//     properties: a map); properties a schema does not declare are never
//     generated;
//   arrays: items, prefixItems, minItems, maxItems;
//   strings: minLength, maxLength, pattern (llm/regex_grammar.h), format
//     date, time, date-time, uuid;
//   integers: minimum, maximum, exclusiveMinimum, exclusiveMaximum;
//   numbers: the same bounds (no exponents are generated; a fraction has at
//     most 6 digits; a range inside one unit interval is generated from its
//     first fraction digits, or as its midpoint).
// Annotations (title, description, default, examples, $schema, $id,
// $comment, deprecated, readOnly, writeOnly) are ignored. Any other keyword
// (not, if/then/else, uniqueItems, contains, multipleOf, patternProperties,
// propertyNames, dependentRequired, ..., an unknown format) is refused with
// INVALID_ARGUMENT naming it: the server does not promise what it cannot keep.
//
// Whitespace: at most a few spaces or newlines between tokens, and none
// after the end, so generation stops as soon as the value is complete.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"

namespace inferd::llm {

// GBNF text (rules, `root` first) for the JSON text of `schema` (JSON).
Result<std::string> JsonSchemaToGbnf(std::string_view schema);

// GBNF text for any JSON object (OpenAI's {"type": "json_object"}).
std::string AnyJsonObjectGbnf();

}  // namespace inferd::llm
