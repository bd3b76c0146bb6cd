#include "tracing/otlp_encoder.h"

#include <bit>
#include <cassert>
#include <cmath>
#include <cstring>

#include "core/json_text.h"
#include "llm/unicode_tables.h"
#include "tracing/trace_context.h"

namespace inferd::tracing {
namespace {

// ---- protobuf wire format ----
// Every message's size is computed first (arithmetic over the spans), then the
// bytes are written once into a buffer of the exact size: no buffer per nested
// message, no copies. String fields are UTF-8 (protobuf parsers refuse invalid
// UTF-8 there): ASCII, the usual case, is taken as is; other text is cleaned
// (invalid sequences replaced), in both passes alike.
enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLen = 2, kFixed32 = 5 };

size_t VarintSize(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}
size_t TagSize(uint32_t field) { return VarintSize(static_cast<uint64_t>(field) << 3); }
size_t LenField(uint32_t field, size_t len) { return TagSize(field) + VarintSize(len) + len; }
bool Ascii(std::string_view s) {
  unsigned char any = 0;
  for (char c : s) any |= static_cast<unsigned char>(c);
  return any < 0x80;
}
size_t CleanSize(std::string_view s) { return Ascii(s) ? s.size() : llm::SanitizeUtf8(s).size(); }
size_t StrField(uint32_t field, std::string_view s) { return LenField(field, CleanSize(s)); }

size_t AnyValueSize(const SpanValue& v) {
  // AnyValue: string_value 1, bool_value 2, int_value 3, double_value 4.
  if (const auto* s = std::get_if<std::string>(&v)) return StrField(1, *s);
  if (std::holds_alternative<bool>(v)) return 2;
  if (const auto* i = std::get_if<int64_t>(&v)) return 1 + VarintSize(static_cast<uint64_t>(*i));
  return 9;
}
size_t KeyValueSize(std::string_view key, const SpanValue& v) {
  return StrField(1, key) + LenField(2, AnyValueSize(v));
}
size_t EventSize(const SpanEvent& e) { return 9 + StrField(2, e.name); }
size_t StatusSize(const SpanRecord& s) {
  return (s.status_message.empty() ? 0 : StrField(2, s.status_message)) + 1 +
         VarintSize(static_cast<uint64_t>(s.status));
}
size_t SpanSize(const SpanRecord& s) {
  // Span: trace_id 1, span_id 2, trace_state 3, parent_span_id 4, name 5, kind 6, start 7, end 8,
  // attributes 9, events 11, status 15, flags 16.
  size_t n = LenField(1, 16) + LenField(2, 8) + StrField(5, s.name) + 1 + VarintSize(static_cast<uint64_t>(s.kind)) +
             9 + 9 + TagSize(16) + 4;
  if (!s.trace_state.empty()) n += StrField(3, s.trace_state);
  if (s.parent_span_id != 0) n += LenField(4, 8);
  for (const auto& a : s.attributes) n += LenField(9, KeyValueSize(a.key, a.value));
  for (const auto& e : s.events) n += LenField(11, EventSize(e));
  if (s.status != SpanStatus::kUnset) n += LenField(15, StatusSize(s));
  return n;
}

class Writer {
 public:
  explicit Writer(char* p) : p_(p) {}
  char* end() const { return p_; }
  void Varint(uint64_t v) {
    while (v >= 0x80) {
      *p_++ = static_cast<char>((v & 0x7f) | 0x80);
      v >>= 7;
    }
    *p_++ = static_cast<char>(v);
  }
  // Little-endian fixed-width values (protobuf's order), one store each.
  template <typename T>
  void Little(T v) {
    if constexpr (std::endian::native != std::endian::little) {
      if constexpr (sizeof v == 8)
        v = __builtin_bswap64(v);
      else
        v = __builtin_bswap32(v);
    }
    std::memcpy(p_, &v, sizeof v);
    p_ += sizeof v;
  }
  void Tag(uint32_t field, WireType t) { Varint((static_cast<uint64_t>(field) << 3) | t); }
  void Len(uint32_t field, size_t len) {
    Tag(field, kLen);
    Varint(len);
  }
  void Fixed64(uint32_t field, uint64_t v) {
    Tag(field, kFixed64);
    Little(v);
  }
  void Fixed32(uint32_t field, uint32_t v) {
    Tag(field, kFixed32);
    Little(v);
  }
  void UInt(uint32_t field, uint64_t v) {
    Tag(field, kVarint);
    Varint(v);
  }
  void BigEndian(uint64_t v) {
    if constexpr (std::endian::native == std::endian::little) v = __builtin_bswap64(v);
    std::memcpy(p_, &v, sizeof v);
    p_ += sizeof v;
  }
  void Str(uint32_t field, std::string_view s) {
    if (Ascii(s)) return Raw(field, s);
    Raw(field, llm::SanitizeUtf8(s));
  }
  void AnyValue(const SpanValue& v) {
    if (const auto* s = std::get_if<std::string>(&v)) {
      Str(1, *s);
    } else if (const auto* b = std::get_if<bool>(&v)) {
      UInt(2, *b ? 1 : 0);
    } else if (const auto* i = std::get_if<int64_t>(&v)) {
      UInt(3, static_cast<uint64_t>(*i));
    } else {
      uint64_t bits;
      const double d = std::get<double>(v);
      std::memcpy(&bits, &d, sizeof bits);
      Fixed64(4, bits);
    }
  }
  void KeyValue(uint32_t field, std::string_view key, const SpanValue& v) {
    Len(field, KeyValueSize(key, v));
    Str(1, key);
    Len(2, AnyValueSize(v));
    AnyValue(v);
  }
  void Span(const SpanRecord& s) {
    Len(1, 16);
    BigEndian(s.trace_id.hi);
    BigEndian(s.trace_id.lo);
    Len(2, 8);
    BigEndian(s.span_id);
    if (!s.trace_state.empty()) Str(3, s.trace_state);
    if (s.parent_span_id != 0) {
      Len(4, 8);
      BigEndian(s.parent_span_id);
    }
    Str(5, s.name);
    UInt(6, static_cast<uint64_t>(s.kind));
    Fixed64(7, static_cast<uint64_t>(s.start_unix_ns));
    Fixed64(8, static_cast<uint64_t>(s.end_unix_ns));
    for (const auto& a : s.attributes) KeyValue(9, a.key, a.value);
    for (const auto& e : s.events) {
      // Event: time_unix_nano 1, name 2.
      Len(11, EventSize(e));
      Fixed64(1, static_cast<uint64_t>(e.unix_ns));
      Str(2, e.name);
    }
    if (s.status != SpanStatus::kUnset) {
      // Status: message 2, code 3.
      Len(15, StatusSize(s));
      if (!s.status_message.empty()) Str(2, s.status_message);
      UInt(3, static_cast<uint64_t>(s.status));
    }
    Fixed32(16, 0x1);  // W3C trace flags: sampled
  }

 private:
  void Raw(uint32_t field, std::string_view s) {
    Len(field, s.size());
    std::memcpy(p_, s.data(), s.size());
    p_ += s.size();
  }
  char* p_;
};

// ---- JSON ----
void JsonString(std::string* out, std::string_view s) { json::AppendEscaped(out, llm::SanitizeUtf8(s)); }

void JsonAnyValue(std::string* out, const SpanValue& v) {
  if (const auto* s = std::get_if<std::string>(&v)) {
    out->append("{\"stringValue\":");
    JsonString(out, *s);
  } else if (const auto* b = std::get_if<bool>(&v)) {
    out->append(*b ? "{\"boolValue\":true" : "{\"boolValue\":false");
  } else if (const auto* i = std::get_if<int64_t>(&v)) {
    out->append("{\"intValue\":\"").append(std::to_string(*i)).append("\"");
  } else {
    const double d = std::get<double>(v);
    if (std::isfinite(d)) {
      char buf[32];
      snprintf(buf, sizeof buf, "%.17g", d);
      out->append("{\"doubleValue\":").append(buf);
    } else {
      out->append("{\"doubleValue\":").append(std::isnan(d) ? "\"NaN\"" : d > 0 ? "\"Infinity\"" : "\"-Infinity\"");
    }
  }
  out->push_back('}');
}

void JsonAttributes(std::string* out, const std::vector<std::pair<std::string_view, const SpanValue*>>& attrs) {
  out->append("\"attributes\":[");
  for (size_t i = 0; i < attrs.size(); ++i) {
    if (i) out->push_back(',');
    out->append("{\"key\":");
    JsonString(out, attrs[i].first);
    out->append(",\"value\":");
    JsonAnyValue(out, *attrs[i].second);
    out->push_back('}');
  }
  out->push_back(']');
}

void SpanJson(std::string* out, const SpanRecord& s) {
  out->append("{\"traceId\":\"").append(HexTraceId(s.trace_id));
  out->append("\",\"spanId\":\"").append(HexSpanId(s.span_id)).append("\"");
  if (s.parent_span_id != 0) out->append(",\"parentSpanId\":\"").append(HexSpanId(s.parent_span_id)).append("\"");
  if (!s.trace_state.empty()) {
    out->append(",\"traceState\":");
    JsonString(out, s.trace_state);
  }
  out->append(",\"name\":");
  JsonString(out, s.name);
  out->append(",\"kind\":").append(std::to_string(static_cast<int>(s.kind)));
  out->append(",\"startTimeUnixNano\":\"").append(std::to_string(static_cast<uint64_t>(s.start_unix_ns)));
  out->append("\",\"endTimeUnixNano\":\"").append(std::to_string(static_cast<uint64_t>(s.end_unix_ns))).append("\",");
  std::vector<std::pair<std::string_view, const SpanValue*>> attrs;
  attrs.reserve(s.attributes.size());
  for (const auto& a : s.attributes) attrs.emplace_back(a.key, &a.value);
  JsonAttributes(out, attrs);
  out->append(",\"events\":[");
  for (size_t i = 0; i < s.events.size(); ++i) {
    if (i) out->push_back(',');
    out->append("{\"timeUnixNano\":\"").append(std::to_string(static_cast<uint64_t>(s.events[i].unix_ns)));
    out->append("\",\"name\":");
    JsonString(out, s.events[i].name);
    out->push_back('}');
  }
  out->append("],\"flags\":1");
  if (s.status != SpanStatus::kUnset) {
    out->append(",\"status\":{\"code\":").append(std::to_string(static_cast<int>(s.status)));
    if (!s.status_message.empty()) {
      out->append(",\"message\":");
      JsonString(out, s.status_message);
    }
    out->push_back('}');
  }
  out->push_back('}');
}

}  // namespace

std::string EncodeOtlpProtobuf(const OtlpResource& resource, const std::vector<SpanRecord>& spans) {
  // ExportTraceServiceRequest {resource_spans 1: ResourceSpans {resource 1: Resource {attributes 1},
  // scope_spans 2: ScopeSpans {scope 1: InstrumentationScope {name 1, version 2}, spans 2}}}.
  std::vector<size_t> span_sizes;
  span_sizes.reserve(spans.size());
  std::vector<SpanValue> resource_values;
  resource_values.reserve(resource.attributes.size());
  size_t res_size = 0;
  for (const auto& [k, v] : resource.attributes) {
    resource_values.emplace_back(v);
    res_size += LenField(1, KeyValueSize(k, resource_values.back()));
  }
  const size_t scope_size =
      StrField(1, resource.scope_name) + (resource.scope_version.empty() ? 0 : StrField(2, resource.scope_version));
  size_t ss_size = LenField(1, scope_size);
  for (const auto& s : spans) {
    span_sizes.push_back(SpanSize(s));
    ss_size += LenField(2, span_sizes.back());
  }
  const size_t rs_size = LenField(1, res_size) + LenField(2, ss_size);
  std::string out(LenField(1, rs_size), '\0');
  Writer w(out.data());
  w.Len(1, rs_size);
  w.Len(1, res_size);
  for (size_t i = 0; i < resource_values.size(); ++i) w.KeyValue(1, resource.attributes[i].first, resource_values[i]);
  w.Len(2, ss_size);
  w.Len(1, scope_size);
  w.Str(1, resource.scope_name);
  if (!resource.scope_version.empty()) w.Str(2, resource.scope_version);
  for (size_t i = 0; i < spans.size(); ++i) {
    w.Len(2, span_sizes[i]);
    w.Span(spans[i]);
  }
  // The sizes above and the writes agree exactly (the fuzz target checks it under ASan).
  assert(w.end() == out.data() + out.size());
  return out;
}

std::string EncodeOtlpJson(const OtlpResource& resource, const std::vector<SpanRecord>& spans) {
  std::string out = "{\"resourceSpans\":[{\"resource\":{";
  std::vector<SpanValue> values;
  values.reserve(resource.attributes.size());
  for (const auto& kv : resource.attributes) values.emplace_back(kv.second);
  std::vector<std::pair<std::string_view, const SpanValue*>> attrs;
  for (size_t i = 0; i < values.size(); ++i) attrs.emplace_back(resource.attributes[i].first, &values[i]);
  JsonAttributes(&out, attrs);
  out.append("},\"scopeSpans\":[{\"scope\":{\"name\":");
  JsonString(&out, resource.scope_name);
  if (!resource.scope_version.empty()) {
    out.append(",\"version\":");
    JsonString(&out, resource.scope_version);
  }
  out.append("},\"spans\":[");
  for (size_t i = 0; i < spans.size(); ++i) {
    if (i) out.push_back(',');
    SpanJson(&out, spans[i]);
  }
  out.append("]}]}]}");
  return out;
}

}  // namespace inferd::tracing
