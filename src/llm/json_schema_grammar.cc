#include "llm/json_schema_grammar.h"

#include <rapidjson/document.h>
#include <rapidjson/pointer.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <vector>

#include "llm/grammar.h"
#include "llm/regex_grammar.h"

namespace inferd::llm {
namespace {

using Value = rapidjson::Value;

constexpr double kBig = 999999999999999.0;  // 15 digits: the largest magnitude generated
constexpr int kMaxDepth = 64;

// The primitives every schema grammar may use.
constexpr const char* kPrimitives = R"(ws ::= | " " | "\n" [ \t]{0,8}
json-char ::= [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} )
json-string ::= "\"" json-char* "\""
json-int ::= "-"? ( [0-9] | [1-9] [0-9]{1,15} )
json-number ::= json-int ( "." [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,3} )?
json-bool ::= "true" | "false"
json-null ::= "null"
json-value ::= json-object | json-array | json-string | json-number | json-bool | json-null
json-object ::= "{" ws ( json-string ws ":" ws json-value ws ( "," ws json-string ws ":" ws json-value ws )* )? "}"
json-array ::= "[" ws ( json-value ws ( "," ws json-value ws )* )? "]"
json-date ::= [0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | "1" [0-9] | "2" [0-8] )
json-time ::= ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{1,6} )? ( "Z" | [+-] ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] )
json-hex ::= [0-9a-f]
json-uuid ::= json-hex{8} "-" json-hex{4} "-" json-hex{4} "-" json-hex{4} "-" json-hex{12}
)";

std::string SchemaJson(const Value& v) {
  rapidjson::StringBuffer b;
  rapidjson::Writer<rapidjson::StringBuffer> w(b);
  v.Accept(w);
  return std::string(b.GetString(), b.GetSize());
}

std::string Digits(size_t n) { return n == 0 ? "" : " [0-9]{" + std::to_string(n) + "}"; }

// Decimal strings a <= b of one length.
std::string SameLength(const std::string& a, const std::string& b) {
  if (a.empty()) return "";
  if (a == b) return GbnfLiteral(a);
  const size_t n = a.size() - 1;
  if (a[0] == b[0]) return GbnfLiteral(a.substr(0, 1)) + " " + SameLength(a.substr(1), b.substr(1));
  const bool a_zero = a.find_first_not_of('0', 1) == std::string::npos;
  const bool b_nine = b.find_first_not_of('9', 1) == std::string::npos;
  std::vector<std::string> alts;
  char lo = a[0], hi = b[0];
  if (!a_zero) {
    alts.push_back(GbnfLiteral(a.substr(0, 1)) + " " + SameLength(a.substr(1), std::string(n, '9')));
    ++lo;
  }
  if (lo <= hi - (b_nine ? 0 : 1)) {
    alts.push_back(std::string("[") + lo + "-" + static_cast<char>(b_nine ? hi : hi - 1) + "]" + Digits(n));
  }
  if (!b_nine) alts.push_back(GbnfLiteral(b.substr(0, 1)) + " " + SameLength(std::string(n, '0'), b.substr(1)));
  std::string out = "(";
  for (size_t k = 0; k < alts.size(); ++k) out += (k ? " | " : "") + alts[k];
  return out + ")";
}

// The decimal integers in [lo, hi], 0 <= lo <= hi.
std::string UnsignedRange(uint64_t lo, uint64_t hi) {
  std::vector<std::string> alts;
  const size_t from = std::to_string(lo).size(), to = std::to_string(hi).size();
  uint64_t p = 1;
  for (size_t k = 1; k < from; ++k) p *= 10;
  for (size_t len = from; len <= to; ++len, p *= 10) {
    const uint64_t a = std::max(lo, len == 1 ? 0 : p), b = std::min(hi, p * 10 - 1);
    if (a <= b) alts.push_back(SameLength(std::to_string(a), std::to_string(b)));
  }
  std::string out = "(";
  for (size_t k = 0; k < alts.size(); ++k) out += (k ? " | " : "") + alts[k];
  return out + ")";
}

std::string SignedRange(int64_t lo, int64_t hi) {
  std::vector<std::string> alts;
  if (hi >= 0)
    alts.push_back(UnsignedRange(static_cast<uint64_t>(std::max<int64_t>(lo, 0)), static_cast<uint64_t>(hi)));
  if (lo < 0) {
    alts.push_back("\"-\" " + UnsignedRange(static_cast<uint64_t>(hi < 0 ? -hi : 1), static_cast<uint64_t>(-lo)));
  }
  if (alts.size() == 1) return alts[0];
  return "(" + alts[0] + " | " + alts[1] + ")";
}

// Decimals (no exponent, at most 6 fraction digits) in [lo, hi], 0 <= lo <= hi.
std::vector<std::string> Magnitudes(double lo, double hi) {
  std::vector<std::string> alts;
  const double ilo = std::ceil(lo), ihi = std::floor(hi);
  const std::string fraction = " ( \".\" [0-9]{1,6} )?";
  if (ilo <= ihi - 1) {
    alts.push_back(UnsignedRange(static_cast<uint64_t>(ilo), static_cast<uint64_t>(ihi - 1)) + fraction);
  }
  if (ihi >= ilo) alts.push_back(GbnfLiteral(std::to_string(static_cast<uint64_t>(ihi))));
  if (lo != ilo) {  // the unit interval lo is inside: fractions above lo's first digit
    const double i0 = std::floor(lo);
    const int d_lo = static_cast<int>(std::floor((lo - i0) * 10));
    int d_hi = 9;
    if (i0 == ihi) d_hi = static_cast<int>(std::floor((hi - i0) * 10)) - 1;
    if (d_lo + 1 <= std::min(d_hi, 9)) {
      alts.push_back(GbnfLiteral(std::to_string(static_cast<uint64_t>(i0)) + ".") + " [" +
                     static_cast<char>('0' + d_lo + 1) + "-" + static_cast<char>('0' + std::min(d_hi, 9)) +
                     "] [0-9]{0,5}");
    }
  }
  return alts;
}

class SchemaCompiler {
 public:
  explicit SchemaCompiler(const rapidjson::Document& doc) : doc_(doc) {}

  Result<std::string> Compile() {
    INFERD_ASSIGN_OR_RETURN(std::string root, Visit(doc_, 0));
    std::string out = "root ::= ws " + root + "\n" + rules_ + kPrimitives;
    return out;
  }

 private:
  static Status Unsupported(std::string_view what) {
    return Status::InvalidArgument("json schema: " + std::string(what) + " is not supported");
  }
  static Status Bad(std::string_view what) { return Status::InvalidArgument("json schema: " + std::string(what)); }

  std::string NewRule(const std::string& body) {
    const std::string name = "s" + std::to_string(++counter_);
    rules_ += name + " ::= " + body + "\n";
    return name;
  }

  Result<std::string> Ref(const std::string& ref, int depth) {
    if (auto it = refs_.find(ref); it != refs_.end()) return it->second;
    if (ref != "#" && ref.rfind("#/", 0) != 0) return Unsupported("$ref '" + ref.substr(0, 64) + "' (only local refs)");
    const Value* target = &doc_;
    if (ref != "#") {
      rapidjson::Pointer p(ref.c_str() + 1, ref.size() - 1);
      if (!p.IsValid()) return Bad("$ref '" + ref.substr(0, 64) + "' is not a JSON pointer");
      target = p.Get(doc_);
      if (target == nullptr) return Bad("$ref '" + ref.substr(0, 64) + "' points at nothing");
    }
    const std::string name = "r" + std::to_string(++counter_);
    refs_.emplace(ref, name);
    INFERD_ASSIGN_OR_RETURN(std::string body, Visit(*target, depth + 1));
    rules_ += name + " ::= " + body + "\n";
    return name;
  }

  static std::optional<double> Num(const Value& s, const char* key) {
    auto it = s.FindMember(key);
    if (it == s.MemberEnd() || !it->value.IsNumber()) return std::nullopt;
    return it->value.GetDouble();
  }

  Status CheckKeywords(const Value& s) {
    static const std::set<std::string> kKnown = {"type",
                                                 "enum",
                                                 "const",
                                                 "anyOf",
                                                 "oneOf",
                                                 "allOf",
                                                 "$ref",
                                                 "nullable",
                                                 "properties",
                                                 "required",
                                                 "additionalProperties",
                                                 "items",
                                                 "prefixItems",
                                                 "minItems",
                                                 "maxItems",
                                                 "minLength",
                                                 "maxLength",
                                                 "pattern",
                                                 "format",
                                                 "minimum",
                                                 "maximum",
                                                 "exclusiveMinimum",
                                                 "exclusiveMaximum",
                                                 "title",
                                                 "description",
                                                 "default",
                                                 "examples",
                                                 "$schema",
                                                 "$id",
                                                 "$comment",
                                                 "deprecated",
                                                 "readOnly",
                                                 "writeOnly",
                                                 "$defs",
                                                 "definitions",
                                                 "strict",
                                                 "name"};
    for (auto m = s.MemberBegin(); m != s.MemberEnd(); ++m) {
      const std::string key(m->name.GetString(), m->name.GetStringLength());
      if (!kKnown.count(key)) return Unsupported("the keyword '" + key.substr(0, 64) + "'");
    }
    return Status::OK();
  }

  Result<std::string> Visit(const Value& s, int depth) {
    if (depth > kMaxDepth) return Bad("nests deeper than 64 schemas");
    if (s.IsBool()) {
      if (!s.GetBool()) return Unsupported("the schema false (nothing is valid)");
      return std::string("json-value");
    }
    if (!s.IsObject()) return Bad("a schema must be an object or a boolean");
    INFERD_RETURN_IF_ERROR(CheckKeywords(s));
    std::string body;
    if (auto r = s.FindMember("$ref"); r != s.MemberEnd()) {
      if (!r->value.IsString()) return Bad("$ref must be a string");
      if (s.MemberCount() > 1) {
        for (auto m = s.MemberBegin(); m != s.MemberEnd(); ++m) {
          const std::string_view k(m->name.GetString(), m->name.GetStringLength());
          if (k != "$ref" && k != "title" && k != "description" && k != "$defs" && k != "definitions" &&
              k != "$schema" && k != "$id" && k != "default" && k != "$comment") {
            return Unsupported("'" + std::string(k.substr(0, 64)) + "' beside $ref");
          }
        }
      }
      INFERD_ASSIGN_OR_RETURN(body, Ref(std::string(r->value.GetString(), r->value.GetStringLength()), depth));
    } else if (auto c = s.FindMember("const"); c != s.MemberEnd()) {
      body = GbnfLiteral(SchemaJson(c->value));
    } else if (auto e = s.FindMember("enum"); e != s.MemberEnd()) {
      if (!e->value.IsArray() || e->value.Empty()) return Bad("enum must be a non-empty array");
      body = "(";
      for (rapidjson::SizeType k = 0; k < e->value.Size(); ++k)
        body += (k ? " | " : "") + GbnfLiteral(SchemaJson(e->value[k]));
      body += ")";
    } else if (auto a = s.FindMember("anyOf"); a != s.MemberEnd()) {
      INFERD_ASSIGN_OR_RETURN(body, Alternatives(a->value, "anyOf", depth));
    } else if (auto o = s.FindMember("oneOf"); o != s.MemberEnd()) {
      INFERD_ASSIGN_OR_RETURN(body, Alternatives(o->value, "oneOf", depth));
    } else if (auto all = s.FindMember("allOf"); all != s.MemberEnd()) {
      if (!all->value.IsArray() || all->value.Size() != 1) return Unsupported("allOf of more than one schema");
      INFERD_ASSIGN_OR_RETURN(body, Visit(all->value[0], depth + 1));
    } else {
      INFERD_ASSIGN_OR_RETURN(body, Typed(s, depth));
    }
    if (auto n = s.FindMember("nullable"); n != s.MemberEnd() && n->value.IsBool() && n->value.GetBool()) {
      body = "(" + body + " | json-null)";
    }
    return body;
  }

  Result<std::string> Alternatives(const Value& list, const char* what, int depth) {
    if (!list.IsArray() || list.Empty()) return Bad(std::string(what) + " must be a non-empty array");
    std::string body = "(";
    for (rapidjson::SizeType k = 0; k < list.Size(); ++k) {
      INFERD_ASSIGN_OR_RETURN(std::string alt, Visit(list[k], depth + 1));
      body += (k ? " | " : "") + alt;
    }
    return body + ")";
  }

  Result<std::string> Typed(const Value& s, int depth) {
    auto t = s.FindMember("type");
    if (t == s.MemberEnd()) {
      if (s.HasMember("properties") || s.HasMember("additionalProperties") || s.HasMember("required")) {
        return Object(s, depth);
      }
      if (s.HasMember("items") || s.HasMember("prefixItems")) return Array(s, depth);
      if (s.HasMember("pattern") || s.HasMember("format") || s.HasMember("minLength") || s.HasMember("maxLength")) {
        return String(s);
      }
      if (s.HasMember("minimum") || s.HasMember("maximum") || s.HasMember("exclusiveMinimum") ||
          s.HasMember("exclusiveMaximum")) {
        return Number(s, false);
      }
      return std::string("json-value");
    }
    if (t->value.IsArray()) {
      if (t->value.Empty()) return Bad("type must not be an empty list");
      std::string body = "(";
      for (rapidjson::SizeType k = 0; k < t->value.Size(); ++k) {
        if (!t->value[k].IsString()) return Bad("type must be a string or a list of strings");
        INFERD_ASSIGN_OR_RETURN(std::string alt, OfType(s, t->value[k].GetString(), depth));
        body += (k ? " | " : "") + alt;
      }
      return body + ")";
    }
    if (!t->value.IsString()) return Bad("type must be a string or a list of strings");
    return OfType(s, t->value.GetString(), depth);
  }

  Result<std::string> OfType(const Value& s, std::string_view type, int depth) {
    if (type == "object") return Object(s, depth);
    if (type == "array") return Array(s, depth);
    if (type == "string") return String(s);
    if (type == "integer") return Number(s, true);
    if (type == "number") return Number(s, false);
    if (type == "boolean") return std::string("json-bool");
    if (type == "null") return std::string("json-null");
    return Bad("unknown type '" + std::string(type.substr(0, 32)) + "'");
  }

  Result<std::string> Object(const Value& s, int depth) {
    auto props = s.FindMember("properties");
    auto addl = s.FindMember("additionalProperties");
    std::set<std::string> required;
    if (auto r = s.FindMember("required"); r != s.MemberEnd()) {
      if (!r->value.IsArray()) return Bad("required must be an array of names");
      for (const auto& n : r->value.GetArray()) {
        if (!n.IsString()) return Bad("required must be an array of names");
        required.emplace(n.GetString(), n.GetStringLength());
      }
    }
    const bool has_props = props != s.MemberEnd() && props->value.IsObject() && props->value.MemberCount() > 0;
    if (props != s.MemberEnd() && !props->value.IsObject()) return Bad("properties must be an object");
    if (!has_props) {
      if (!required.empty()) return Unsupported("required names without properties");
      if (addl == s.MemberEnd() || (addl->value.IsBool() && addl->value.GetBool())) return std::string("json-object");
      if (addl->value.IsBool()) return std::string("( \"{\" ws \"}\" )");
      INFERD_ASSIGN_OR_RETURN(std::string v, Visit(addl->value, depth + 1));
      return NewRule("\"{\" ws ( json-string ws \":\" ws " + v + " ws ( \",\" ws json-string ws \":\" ws " + v +
                     " ws )* )? \"}\"");
    }
    // Members in the schema's order; an optional one may be left out. F_i: the
    // members from i on, none written yet; T_i: the same after one was (a comma first).
    struct Member {
      std::string kv;
      bool required;
    };
    std::vector<Member> members;
    for (auto m = props->value.MemberBegin(); m != props->value.MemberEnd(); ++m) {
      const std::string name(m->name.GetString(), m->name.GetStringLength());
      INFERD_ASSIGN_OR_RETURN(std::string v, Visit(m->value, depth + 1));
      members.push_back({GbnfLiteral(SchemaJson(m->name)) + " ws \":\" ws " + v + " ws", required.count(name) > 0});
      required.erase(name);
    }
    if (!required.empty())
      return Unsupported("the required property '" + required.begin()->substr(0, 64) +
                         "' without a schema in properties");
    std::string next_t, next_f;  // T_{i+1}, F_{i+1} ("" when i+1 == n)
    for (size_t i = members.size(); i-- > 0;) {
      const Member& m = members[i];
      const std::string t_tail = next_t.empty() ? "" : " " + next_t;
      std::string t = "\",\" ws " + m.kv + t_tail;
      std::string f = m.kv + t_tail;
      if (!m.required) {
        t = "( " + t + " )" + (next_t.empty() ? "?" : " | " + next_t);
        f = "( " + f + " )" + (next_f.empty() ? "?" : " | " + next_f);
        if (!next_t.empty()) {
          t = "( " + t + " )";
          f = "( " + f + " )";
        }
      }
      next_t = NewRule(t);
      next_f = NewRule(f);
    }
    return NewRule("\"{\" ws " + next_f + " \"}\"");
  }

  Result<std::string> Array(const Value& s, int depth) {
    std::vector<std::string> prefix;
    if (auto p = s.FindMember("prefixItems"); p != s.MemberEnd()) {
      if (!p->value.IsArray()) return Bad("prefixItems must be an array");
      for (const auto& item : p->value.GetArray()) {
        INFERD_ASSIGN_OR_RETURN(std::string v, Visit(item, depth + 1));
        prefix.push_back(v);
      }
    }
    std::string item = "json-value";
    bool more = true;
    if (auto it = s.FindMember("items"); it != s.MemberEnd()) {
      if (it->value.IsBool() && !it->value.GetBool()) {
        more = false;
      } else if (it->value.IsArray()) {
        return Unsupported("items as an array (use prefixItems)");
      } else {
        INFERD_ASSIGN_OR_RETURN(item, Visit(it->value, depth + 1));
      }
    }
    auto count = [&](const char* key, int64_t fallback) -> Result<int64_t> {
      auto m = s.FindMember(key);
      if (m == s.MemberEnd()) return fallback;
      if (!m->value.IsInt64() || m->value.GetInt64() < 0)
        return Bad(std::string(key) + " must be a non-negative integer");
      return m->value.GetInt64();
    };
    INFERD_ASSIGN_OR_RETURN(int64_t min_items, count("minItems", 0));
    INFERD_ASSIGN_OR_RETURN(int64_t max_items, count("maxItems", -1));
    if (max_items >= 0 && max_items < min_items) return Bad("maxItems is below minItems");
    if (min_items > 1000) return Unsupported("minItems above 1000");
    if (max_items > 1000) max_items = -1;
    const int64_t fixed = static_cast<int64_t>(prefix.size());
    if (!more) max_items = max_items < 0 ? fixed : std::min(max_items, fixed);
    if (max_items >= 0 && max_items < fixed) prefix.resize(static_cast<size_t>(max_items));
    if (min_items > fixed && !more) return Bad("minItems exceeds the items allowed");
    // The array as a list of elements: the prefix ones, then `item` ones.
    std::vector<std::string> seq;  // each element, required ones first
    const int64_t n_prefix = static_cast<int64_t>(prefix.size());
    const int64_t extra_min = std::max<int64_t>(0, min_items - n_prefix);
    const int64_t extra_max = max_items < 0 ? -1 : max_items - n_prefix;  // -1: unbounded
    // Elements from `from` on, with a comma before each but the first element of the array.
    std::string body;
    auto elem = [&](int64_t k, const std::string& v) { return (k == 0 ? "" : std::string("\",\" ws ")) + v + " ws"; };
    // Prefix elements, each required when below min_items, else optional (nested).
    std::string tail;  // the repeated items after the prefix
    {
      const std::string first = elem(n_prefix, item);
      const std::string rest = "\",\" ws " + item + " ws";
      if (extra_max == 0) {
        tail = "";
      } else if (n_prefix == 0) {
        // Plain list: item (, item){min-1, max-1}, optional when min is 0.
        std::string rep;
        if (extra_max < 0) {
          rep = "( " + rest + " )" + (extra_min > 1 ? "{" + std::to_string(extra_min - 1) + ",}" : "*");
        } else {
          rep = "( " + rest + " ){" + std::to_string(std::max<int64_t>(0, extra_min - 1)) + "," +
                std::to_string(extra_max - 1) + "}";
        }
        tail = "( " + first + " " + rep + " )" + (extra_min == 0 ? "?" : "");
      } else {
        const std::string q = extra_max < 0 ? "{" + std::to_string(extra_min) + ",}"
                                            : "{" + std::to_string(extra_min) + "," + std::to_string(extra_max) + "}";
        tail = "( " + rest + " )" + q;
      }
    }
    // Prefix elements from the last: an element at or past min_items is optional (with everything after it).
    std::string after = tail;
    for (int64_t k = n_prefix - 1; k >= 0; --k) {
      std::string e = elem(k, prefix[static_cast<size_t>(k)]) + (after.empty() ? "" : " " + after);
      if (k >= min_items) e = "( " + e + " )?";
      after = e;
    }
    body = after;
    return NewRule("\"[\" ws " + (body.empty() ? std::string() : body + " ") + "\"]\"");
  }

  Result<std::string> String(const Value& s) {
    auto f = s.FindMember("format");
    auto p = s.FindMember("pattern");
    const bool lengths = s.HasMember("minLength") || s.HasMember("maxLength");
    if (f != s.MemberEnd()) {
      if (!f->value.IsString()) return Bad("format must be a string");
      const std::string_view fmt(f->value.GetString(), f->value.GetStringLength());
      if (p != s.MemberEnd() || lengths) return Unsupported("format together with pattern or lengths");
      if (fmt == "date") return std::string("( \"\\\"\" json-date \"\\\"\" )");
      if (fmt == "time") return std::string("( \"\\\"\" json-time \"\\\"\" )");
      if (fmt == "date-time") return std::string("( \"\\\"\" json-date \"T\" json-time \"\\\"\" )");
      if (fmt == "uuid") return std::string("( \"\\\"\" json-uuid \"\\\"\" )");
      return Unsupported("format '" + std::string(fmt.substr(0, 32)) + "'");
    }
    if (p != s.MemberEnd()) {
      if (!p->value.IsString()) return Bad("pattern must be a string");
      if (lengths) return Unsupported("pattern together with minLength or maxLength");
      INFERD_ASSIGN_OR_RETURN(std::string re,
                              RegexToGbnf(std::string_view(p->value.GetString(), p->value.GetStringLength()), true));
      return "( \"\\\"\" " + re + " \"\\\"\" )";
    }
    if (!lengths) return std::string("json-string");
    int64_t lo = 0, hi = -1;
    if (auto m = s.FindMember("minLength"); m != s.MemberEnd()) {
      if (!m->value.IsInt64() || m->value.GetInt64() < 0) return Bad("minLength must be a non-negative integer");
      lo = m->value.GetInt64();
    }
    if (auto m = s.FindMember("maxLength"); m != s.MemberEnd()) {
      if (!m->value.IsInt64() || m->value.GetInt64() < 0) return Bad("maxLength must be a non-negative integer");
      hi = m->value.GetInt64();
    }
    if (hi >= 0 && hi < lo) return Bad("maxLength is below minLength");
    if (lo > 1000) return Unsupported("minLength above 1000");
    if (hi > 1000) hi = -1;
    const std::string q =
        hi < 0 ? "{" + std::to_string(lo) + ",}" : "{" + std::to_string(lo) + "," + std::to_string(hi) + "}";
    return "( \"\\\"\" json-char" + q + " \"\\\"\" )";
  }

  Result<std::string> Number(const Value& s, bool integer) {
    std::optional<double> lo = Num(s, "minimum"), hi = Num(s, "maximum");
    bool lo_open = false, hi_open = false;
    // exclusiveMinimum: a number (draft 6+) or a flag on minimum (draft 4).
    if (auto e = s.FindMember("exclusiveMinimum"); e != s.MemberEnd()) {
      if (e->value.IsNumber()) {
        if (!lo || e->value.GetDouble() >= *lo) lo = e->value.GetDouble(), lo_open = true;
      } else if (e->value.IsBool()) {
        lo_open = e->value.GetBool() && lo.has_value();
      } else {
        return Bad("exclusiveMinimum must be a number");
      }
    }
    if (auto e = s.FindMember("exclusiveMaximum"); e != s.MemberEnd()) {
      if (e->value.IsNumber()) {
        if (!hi || e->value.GetDouble() <= *hi) hi = e->value.GetDouble(), hi_open = true;
      } else if (e->value.IsBool()) {
        hi_open = e->value.GetBool() && hi.has_value();
      } else {
        return Bad("exclusiveMaximum must be a number");
      }
    }
    if (!lo && !hi) return std::string(integer ? "json-int" : "json-number");
    if ((lo && std::abs(*lo) > kBig) || (hi && std::abs(*hi) > kBig)) {
      return Unsupported("a bound beyond 15 digits");
    }
    if (integer) {
      int64_t ilo = -static_cast<int64_t>(kBig), ihi = static_cast<int64_t>(kBig);
      if (lo) ilo = static_cast<int64_t>(std::ceil(*lo)) + (lo_open && std::ceil(*lo) == *lo ? 1 : 0);
      if (hi) ihi = static_cast<int64_t>(std::floor(*hi)) - (hi_open && std::floor(*hi) == *hi ? 1 : 0);
      if (ilo > ihi) return Bad("no integer lies between minimum and maximum");
      return SignedRange(ilo, ihi);
    }
    // Numbers: open bounds are moved in by the smallest step generated (1e-6).
    const double l = lo ? *lo + (lo_open ? 1e-6 : 0) : -kBig, h = hi ? *hi - (hi_open ? 1e-6 : 0) : kBig;
    if (l > h) return Bad("no number lies between minimum and maximum");
    std::vector<std::string> alts;
    if (h >= 0) {
      for (std::string& a : Magnitudes(std::max(l, 0.0), h)) alts.push_back(std::move(a));
    }
    if (l < 0) {
      for (std::string& a : Magnitudes(std::max(-h, 1e-6), -l)) alts.push_back("\"-\" " + a);
    }
    if (alts.empty()) {  // a range inside one unit interval, too narrow for first digits: its midpoint
      char mid[64];
      std::snprintf(mid, sizeof(mid), "%.9g", (l + h) / 2);
      return GbnfLiteral(mid);
    }
    std::string body = "(";
    for (size_t k = 0; k < alts.size(); ++k) body += (k ? " | " : "") + alts[k];
    return body + ")";
  }

  const rapidjson::Document& doc_;
  std::string rules_;
  std::map<std::string, std::string> refs_;
  int counter_ = 0;
};

}  // namespace

Result<std::string> JsonSchemaToGbnf(std::string_view schema) {
  rapidjson::Document d;
  d.Parse<rapidjson::kParseIterativeFlag | rapidjson::kParseValidateEncodingFlag>(schema.data(), schema.size());
  if (d.HasParseError()) return Status::InvalidArgument("json schema: not valid JSON");
  return SchemaCompiler(d).Compile();
}

std::string AnyJsonObjectGbnf() { return std::string("root ::= ws json-object\n") + kPrimitives; }

}  // namespace inferd::llm
