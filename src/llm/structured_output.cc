#include "llm/structured_output.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "llm/json_schema_grammar.h"
#include "llm/regex_grammar.h"

namespace inferd::llm {
namespace {

using Kind = StructuredOutput::Kind;
constexpr unsigned kFlags = rapidjson::kParseIterativeFlag | rapidjson::kParseValidateEncodingFlag;
constexpr size_t kMaxChoices = 1024;

Status ParamError(std::string_view name, std::string_view what) {
  return Status::InvalidArgument(std::string(name) + " " + std::string(what));
}

std::string SerializeJson(const rapidjson::Value& v) {
  rapidjson::StringBuffer b;
  rapidjson::Writer<rapidjson::StringBuffer> w(b);
  v.Accept(w);
  return std::string(b.GetString(), b.GetSize());
}

Result<std::string_view> Text(const Parameter& p, std::string_view name) {
  const auto* s = std::get_if<std::string>(&p);
  if (s == nullptr || s->empty()) return ParamError(name, "must be a non-empty string");
  return std::string_view(*s);
}

Status ParseJson(std::string_view text, std::string_view name, rapidjson::Document* d) {
  d->Parse<kFlags>(text.data(), text.size());
  if (d->HasParseError()) return ParamError(name, "is not valid JSON");
  return Status::OK();
}

Result<StructuredOutput> Schema(const rapidjson::Value& v, std::string_view name) {
  if (!v.IsObject() && !v.IsBool()) return ParamError(name, "must be a JSON schema (an object)");
  return StructuredOutput{Kind::kJsonSchema, SerializeJson(v), std::string(name)};
}

Result<StructuredOutput> Choices(const rapidjson::Value& v, std::string_view name) {
  if (!v.IsArray() || v.Empty() || v.Size() > kMaxChoices) {
    return ParamError(name, "must be an array of 1 to 1024 strings");
  }
  for (const auto& c : v.GetArray()) {
    if (!c.IsString()) return ParamError(name, "must be an array of 1 to 1024 strings");
  }
  return StructuredOutput{Kind::kChoice, SerializeJson(v), std::string(name)};
}

Result<std::optional<StructuredOutput>> ResponseFormat(std::string_view text) {
  rapidjson::Document d;
  INFERD_RETURN_IF_ERROR(ParseJson(text, "response_format", &d));
  if (!d.IsObject()) return ParamError("response_format", "must be an object");
  auto t = d.FindMember("type");
  if (t == d.MemberEnd() || !t->value.IsString()) return ParamError("response_format.type", "is required");
  const std::string_view type(t->value.GetString(), t->value.GetStringLength());
  if (type == "text") return std::optional<StructuredOutput>();
  if (type == "json_object") {
    if (auto s = d.FindMember("schema"); s != d.MemberEnd()) {  // llama.cpp's server
      INFERD_ASSIGN_OR_RETURN(StructuredOutput o, Schema(s->value, "response_format.schema"));
      return std::optional<StructuredOutput>(std::move(o));
    }
    return std::optional<StructuredOutput>(StructuredOutput{Kind::kJsonObject, "", "response_format"});
  }
  if (type == "json_schema") {
    auto js = d.FindMember("json_schema");
    if (js == d.MemberEnd() || !js->value.IsObject()) return ParamError("response_format.json_schema", "is required");
    auto s = js->value.FindMember("schema");
    if (s == js->value.MemberEnd()) return ParamError("response_format.json_schema.schema", "is required");
    INFERD_ASSIGN_OR_RETURN(StructuredOutput o, Schema(s->value, "response_format.json_schema.schema"));
    return std::optional<StructuredOutput>(std::move(o));
  }
  return ParamError("response_format.type",
                    "'" + std::string(type.substr(0, 32)) + "' is not supported (text, json_object or json_schema)");
}

Result<StructuredOutput> VllmStructuredOutputs(std::string_view text) {
  rapidjson::Document d;
  INFERD_RETURN_IF_ERROR(ParseJson(text, "structured_outputs", &d));
  if (!d.IsObject()) return ParamError("structured_outputs", "must be an object");
  std::optional<StructuredOutput> out;
  for (auto m = d.MemberBegin(); m != d.MemberEnd(); ++m) {
    const std::string key(m->name.GetString(), m->name.GetStringLength());
    const std::string name = "structured_outputs." + key.substr(0, 32);
    if (m->value.IsNull() || (m->value.IsBool() && !m->value.GetBool() && key != "json")) continue;
    StructuredOutput o;
    if (key == "json") {
      if (m->value.IsString()) {
        rapidjson::Document inner;
        INFERD_RETURN_IF_ERROR(
            ParseJson(std::string_view(m->value.GetString(), m->value.GetStringLength()), name, &inner));
        INFERD_ASSIGN_OR_RETURN(o, Schema(inner, name));
      } else {
        INFERD_ASSIGN_OR_RETURN(o, Schema(m->value, name));
      }
    } else if (key == "json_object") {
      if (!m->value.IsBool()) return ParamError(name, "must be true or false");
      o = {Kind::kJsonObject, "", name};
    } else if (key == "regex" || key == "grammar") {
      if (!m->value.IsString() || m->value.GetStringLength() == 0)
        return ParamError(name, "must be a non-empty string");
      o = {key == "regex" ? Kind::kRegex : Kind::kGrammar,
           std::string(m->value.GetString(), m->value.GetStringLength()), name};
    } else if (key == "choice") {
      INFERD_ASSIGN_OR_RETURN(o, Choices(m->value, name));
    } else {
      return ParamError(name, "is not supported (json, json_object, regex, choice, grammar)");
    }
    if (out)
      return Status::InvalidArgument("structured_outputs may ask for one form, not both " + out->parameter + " and " +
                                     name);
    out = std::move(o);
  }
  if (!out) return ParamError("structured_outputs", "asks for nothing (json, json_object, regex, choice or grammar)");
  return *out;
}

}  // namespace

std::string StructuredOutput::CacheKey() const {
  std::string key(1, static_cast<char>('0' + static_cast<int>(kind)));
  key.push_back('\0');
  key.append(spec);
  return key;
}

Result<std::optional<StructuredOutput>> ParseStructuredOutput(const Parameters& parameters) {
  std::optional<StructuredOutput> found;
  auto take = [&](std::optional<StructuredOutput> s) -> Status {
    if (!s) return Status::OK();
    if (found) {
      return Status::InvalidArgument("give one structured output, not both " + found->parameter + " and " +
                                     s->parameter);
    }
    found = std::move(s);
    return Status::OK();
  };
  for (const auto& [name, value] : parameters) {
    if (name == "response_format") {
      INFERD_ASSIGN_OR_RETURN(std::string_view t, Text(value, name));
      INFERD_ASSIGN_OR_RETURN(auto s, ResponseFormat(t));
      INFERD_RETURN_IF_ERROR(take(std::move(s)));
    } else if (name == "guided_json" || name == "json_schema") {
      INFERD_ASSIGN_OR_RETURN(std::string_view t, Text(value, name));
      rapidjson::Document d;
      INFERD_RETURN_IF_ERROR(ParseJson(t, name, &d));
      INFERD_ASSIGN_OR_RETURN(StructuredOutput s, Schema(d, name));
      INFERD_RETURN_IF_ERROR(take(std::move(s)));
    } else if (name == "guided_regex") {
      INFERD_ASSIGN_OR_RETURN(std::string_view t, Text(value, name));
      INFERD_RETURN_IF_ERROR(take(StructuredOutput{Kind::kRegex, std::string(t), name}));
    } else if (name == "guided_grammar" || name == "grammar") {
      INFERD_ASSIGN_OR_RETURN(std::string_view t, Text(value, name));
      INFERD_RETURN_IF_ERROR(take(StructuredOutput{Kind::kGrammar, std::string(t), name}));
    } else if (name == "guided_choice") {
      INFERD_ASSIGN_OR_RETURN(std::string_view t, Text(value, name));
      rapidjson::Document d;
      INFERD_RETURN_IF_ERROR(ParseJson(t, name, &d));
      INFERD_ASSIGN_OR_RETURN(StructuredOutput s, Choices(d, name));
      INFERD_RETURN_IF_ERROR(take(std::move(s)));
    } else if (name == "structured_outputs") {
      INFERD_ASSIGN_OR_RETURN(std::string_view t, Text(value, name));
      INFERD_ASSIGN_OR_RETURN(StructuredOutput s, VllmStructuredOutputs(t));
      INFERD_RETURN_IF_ERROR(take(std::move(s)));
    } else if (name == "guided_whitespace_pattern") {
      return ParamError(name, "is not supported (whitespace in JSON is limited to a few spaces or newlines)");
    }
  }
  return found;
}

Result<std::string> StructuredOutputGbnf(const StructuredOutput& s) {
  auto named = [&](Result<std::string> r) -> Result<std::string> {
    if (!r.ok()) return Status::InvalidArgument(s.parameter + ": " + r.status().message());
    return r;
  };
  switch (s.kind) {
    case Kind::kJsonSchema:
      return named(JsonSchemaToGbnf(s.spec));
    case Kind::kJsonObject:
      return AnyJsonObjectGbnf();
    case Kind::kRegex: {
      INFERD_ASSIGN_OR_RETURN(std::string e, named(RegexToGbnf(s.spec, false)));
      return "root ::= " + e + "\n";
    }
    case Kind::kChoice: {
      rapidjson::Document d;
      d.Parse<kFlags>(s.spec.data(), s.spec.size());
      if (d.HasParseError() || !d.IsArray()) return ParamError(s.parameter, "must be an array of strings");
      std::string out = "root ::= ";
      for (rapidjson::SizeType k = 0; k < d.Size(); ++k) {
        if (!d[k].IsString()) return ParamError(s.parameter, "must be an array of strings");
        out += (k ? " | " : "") + GbnfLiteral(std::string_view(d[k].GetString(), d[k].GetStringLength()));
      }
      return out + "\n";
    }
    case Kind::kGrammar:
      return s.spec;
  }
  return Status::Internal("unknown structured output kind");
}

Result<std::shared_ptr<const Grammar>> CompileStructuredOutput(const StructuredOutput& s, const GrammarLimits& limits) {
  INFERD_ASSIGN_OR_RETURN(std::string text, StructuredOutputGbnf(s));
  Result<Grammar> g = ParseGbnf(text, limits);
  if (!g.ok()) return Status::InvalidArgument(s.parameter + ": " + g.status().message());
  return std::make_shared<const Grammar>(std::move(*g));
}

}  // namespace inferd::llm
