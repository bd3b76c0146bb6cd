// Parsing a JSON body within JsonLimits (core/json_limits.h): the document is
// built as usual (rapidjson's DOM), through a handler that counts values and
// depth and stops the parse at the first excess -- one pass, no document
// larger than the limits is ever built. Internal to the codec library.
#pragma once

#include <rapidjson/document.h>
#include <rapidjson/encodedstream.h>
#include <rapidjson/memorystream.h>
#include <rapidjson/reader.h>

#include <string>
#include <string_view>

#include "core/json_limits.h"
#include "core/status.h"

namespace inferd::json {

struct LimitedParse {
  rapidjson::ParseResult result;  // a syntax error (when `over` is empty)
  std::string over;               // non-empty: which limit the body broke (the parse stopped there)
  bool too_deep = false;          // ... the depth (else the values)
  // The broken limit as a status: too deep is a malformed body (400), too many values too large a one (413).
  Status LimitError() const { return too_deep ? Status::InvalidArgument(over) : Status::ResourceExhausted(over); }
};

namespace internal {

// Forwards every SAX event to the document, counting.
class CountingHandler {
 public:
  CountingHandler(rapidjson::Document& doc, const JsonLimits& limits, LimitedParse* out)
      : doc_(doc), limits_(limits), out_(out) {}
  bool Null() { return Value() && doc_.Null(); }
  bool Bool(bool b) { return Value() && doc_.Bool(b); }
  bool Int(int i) { return Value() && doc_.Int(i); }
  bool Uint(unsigned u) { return Value() && doc_.Uint(u); }
  bool Int64(int64_t i) { return Value() && doc_.Int64(i); }
  bool Uint64(uint64_t u) { return Value() && doc_.Uint64(u); }
  bool Double(double d) { return Value() && doc_.Double(d); }
  bool RawNumber(const char* s, rapidjson::SizeType n, bool copy) { return Value() && doc_.RawNumber(s, n, copy); }
  bool String(const char* s, rapidjson::SizeType n, bool copy) { return Value() && doc_.String(s, n, copy); }
  bool Key(const char* s, rapidjson::SizeType n, bool copy) { return doc_.Key(s, n, copy); }
  bool StartObject() { return Open() && doc_.StartObject(); }
  bool EndObject(rapidjson::SizeType members) {
    --depth_;
    return doc_.EndObject(members);
  }
  bool StartArray() { return Open() && doc_.StartArray(); }
  bool EndArray(rapidjson::SizeType elements) {
    --depth_;
    return doc_.EndArray(elements);
  }

 private:
  bool Value() {
    if (++elements_ <= limits_.max_elements) return true;
    out_->over =
        "the JSON body holds more than " + std::to_string(limits_.max_elements) + " values (--json-max-elements)";
    return false;
  }
  bool Open() {
    if (!Value()) return false;
    if (++depth_ <= limits_.max_depth) return true;
    out_->over = "the JSON body nests deeper than " + std::to_string(limits_.max_depth) + " levels (--json-max-depth)";
    out_->too_deep = true;
    return false;
  }

  rapidjson::Document& doc_;
  const JsonLimits& limits_;
  LimitedParse* out_;
  size_t elements_ = 0;
  size_t depth_ = 0;
};

}  // namespace internal

// Parses `text` into `doc` (parse flags `Flags`) within `limits`.
template <unsigned Flags>
LimitedParse ParseWithin(rapidjson::Document* doc, std::string_view text, const JsonLimits& limits) {
  LimitedParse out;
  auto generate = [&](rapidjson::Document& d) {
    internal::CountingHandler h(d, limits, &out);
    rapidjson::Reader reader;
    rapidjson::MemoryStream ms(text.data(), text.size());
    rapidjson::EncodedInputStream<rapidjson::UTF8<>, rapidjson::MemoryStream> is(ms);
    out.result = reader.Parse<Flags>(is, h);
    return !out.result.IsError();
  };
  doc->Populate(generate);
  return out;
}

}  // namespace inferd::json
