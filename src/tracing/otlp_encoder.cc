#include "tracing/otlp_encoder.h"

#include <cmath>
#include <cstring>

#include "core/json_text.h"
#include "llm/unicode_tables.h"
#include "tracing/trace_context.h"

namespace inferd::tracing {
namespace {

// ---- protobuf wire format ----
enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLen = 2, kFixed32 = 5 };

void Varint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}
void Tag(std::string* out, uint32_t field, WireType t) { Varint(out, (static_cast<uint64_t>(field) << 3) | t); }
void Fixed64(std::string* out, uint32_t field, uint64_t v) {
  Tag(out, field, kFixed64);
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void Fixed32(std::string* out, uint32_t field, uint32_t v) {
  Tag(out, field, kFixed32);
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void Bytes(std::string* out, uint32_t field, std::string_view b) {
  Tag(out, field, kLen);
  Varint(out, b.size());
  out->append(b);
}
// A string field: protobuf parsers refuse invalid UTF-8 there.
void Str(std::string* out, uint32_t field, std::string_view s) { Bytes(out, field, llm::SanitizeUtf8(s)); }
void UInt(std::string* out, uint32_t field, uint64_t v) {
  Tag(out, field, kVarint);
  Varint(out, v);
}
// A nested message: written into a scratch string, then length-prefixed.
template <typename F>
void Message(std::string* out, uint32_t field, F&& fill) {
  std::string m;
  fill(&m);
  Bytes(out, field, m);
}

std::string BigEndian(uint64_t v) {
  std::string b(8, '\0');
  for (int i = 0; i < 8; ++i) b[i] = static_cast<char>((v >> (56 - 8 * i)) & 0xff);
  return b;
}

void AnyValue(std::string* out, const SpanValue& v) {
  // AnyValue: string_value 1, bool_value 2, int_value 3, double_value 4.
  if (const auto* s = std::get_if<std::string>(&v)) {
    Str(out, 1, *s);
  } else if (const auto* b = std::get_if<bool>(&v)) {
    UInt(out, 2, *b ? 1 : 0);
  } else if (const auto* i = std::get_if<int64_t>(&v)) {
    UInt(out, 3, static_cast<uint64_t>(*i));
  } else {
    uint64_t bits;
    const double d = std::get<double>(v);
    std::memcpy(&bits, &d, sizeof bits);
    Fixed64(out, 4, bits);
  }
}

void KeyValue(std::string* out, uint32_t field, std::string_view key, const SpanValue& value) {
  Message(out, field, [&](std::string* kv) {
    Str(kv, 1, key);
    Message(kv, 2, [&](std::string* any) { AnyValue(any, value); });
  });
}

void SpanProto(std::string* out, const SpanRecord& s) {
  // Span: trace_id 1, span_id 2, trace_state 3, parent_span_id 4, name 5, kind 6, start 7, end 8,
  // attributes 9, events 11, status 15, flags 16.
  Bytes(out, 1, BigEndian(s.trace_id.hi) + BigEndian(s.trace_id.lo));
  Bytes(out, 2, BigEndian(s.span_id));
  if (!s.trace_state.empty()) Str(out, 3, s.trace_state);
  if (s.parent_span_id != 0) Bytes(out, 4, BigEndian(s.parent_span_id));
  Str(out, 5, s.name);
  UInt(out, 6, static_cast<uint64_t>(s.kind));
  Fixed64(out, 7, static_cast<uint64_t>(s.start_unix_ns));
  Fixed64(out, 8, static_cast<uint64_t>(s.end_unix_ns));
  for (const auto& a : s.attributes) KeyValue(out, 9, a.key, a.value);
  for (const auto& e : s.events) {
    // Event: time_unix_nano 1, name 2.
    Message(out, 11, [&](std::string* ev) {
      Fixed64(ev, 1, static_cast<uint64_t>(e.unix_ns));
      Str(ev, 2, e.name);
    });
  }
  if (s.status != SpanStatus::kUnset) {
    // Status: message 2, code 3.
    Message(out, 15, [&](std::string* st) {
      if (!s.status_message.empty()) Str(st, 2, s.status_message);
      UInt(st, 3, static_cast<uint64_t>(s.status));
    });
  }
  Fixed32(out, 16, 0x1);  // W3C trace flags: sampled
}

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
  std::string out;
  // ExportTraceServiceRequest.resource_spans 1 -> ResourceSpans {resource 1, scope_spans 2}.
  Message(&out, 1, [&](std::string* rs) {
    Message(rs, 1, [&](std::string* res) {
      for (const auto& [k, v] : resource.attributes) KeyValue(res, 1, k, SpanValue(v));
    });
    // ScopeSpans {scope 1 {name 1, version 2}, spans 2}.
    Message(rs, 2, [&](std::string* ss) {
      Message(ss, 1, [&](std::string* scope) {
        Str(scope, 1, resource.scope_name);
        if (!resource.scope_version.empty()) Str(scope, 2, resource.scope_version);
      });
      for (const auto& s : spans) Message(ss, 2, [&](std::string* sp) { SpanProto(sp, s); });
    });
  });
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
