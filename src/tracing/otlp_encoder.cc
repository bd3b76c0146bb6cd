#include "tracing/otlp_encoder.h"

#include <array>
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

size_t VarintSize(uint64_t v) { return (static_cast<size_t>(std::bit_width(v | 1)) + 6) / 7; }
size_t TagSize(uint32_t field) { return VarintSize(static_cast<uint64_t>(field) << 3); }
size_t LenField(uint32_t field, size_t len) { return TagSize(field) + VarintSize(len) + len; }
// Eight bytes at a time: the high bit of any byte set means non-ASCII. The
// last word overlaps the one before it (no byte-by-byte tail for the usual
// keys and names of 8 to 30 bytes); shorter text is read as two overlapping
// halves.
bool Ascii(std::string_view s) {
  const char* p = s.data();
  const size_t n = s.size();
  uint64_t any = 0;
  if (n >= 8) {
    uint64_t w;
    for (size_t i = 0; i + 8 < n; i += 8) {
      std::memcpy(&w, p + i, sizeof w);
      any |= w;
    }
    std::memcpy(&w, p + n - 8, sizeof w);
    any |= w;
  } else if (n >= 4) {
    uint32_t a, b;
    std::memcpy(&a, p, sizeof a);
    std::memcpy(&b, p + n - 4, sizeof b);
    any = a | b;
  } else {
    for (size_t i = 0; i < n; ++i) any |= static_cast<unsigned char>(p[i]);
  }
  return (any & 0x8080808080808080ull) == 0;
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
  // A string already clean (ASCII, or cleaned).
  void Raw(uint32_t field, std::string_view s) {
    Len(field, s.size());
    std::memcpy(p_, s.data(), s.size());
    p_ += s.size();
  }

 private:
  char* p_;
};

// One span's Span message: every string checked (and, if need be, cleaned)
// once and every nested size computed once, then written in one pass.
// Span: trace_id 1, span_id 2, trace_state 3, parent_span_id 4, name 5,
// kind 6, start 7, end 8, attributes 9, dropped_attributes_count 10, events
// 11, dropped_events_count 12, status 15, flags 16.
class SpanPlan {
 public:
  explicit SpanPlan(const SpanRecord& s) : s_(s) {
    name_ = Text(s.name);
    size_ = LenField(1, 16) + LenField(2, 8) + LenField(5, name_.size()) + 1 +
            VarintSize(static_cast<uint64_t>(s.kind)) + 9 + 9 + TagSize(16) + 4;
    if (!s.trace_state.empty()) {
      trace_state_ = Text(s.trace_state);
      size_ += LenField(3, trace_state_.size());
    }
    if (s.parent_span_id != 0) size_ += LenField(4, 8);
    for (size_t i = 0; i < s.attributes.size(); ++i) {
      const SpanAttribute& a = s.attributes[i];
      keys_[i] = Text(a.key);
      size_t any;
      if (const auto* str = std::get_if<std::string>(&a.value)) {
        values_[i] = Text(*str);
        any = LenField(1, values_[i].size());
      } else {
        any = AnyValueSize(a.value);
      }
      any_size_[i] = static_cast<uint32_t>(any);
      kv_size_[i] = static_cast<uint32_t>(LenField(1, keys_[i].size()) + LenField(2, any));
      size_ += LenField(9, kv_size_[i]);
    }
    if (s.dropped_attributes != 0) size_ += 1 + VarintSize(s.dropped_attributes);
    for (size_t i = 0; i < s.events.size(); ++i) {
      event_names_[i] = Text(s.events[i].name);
      event_size_[i] = static_cast<uint32_t>(9 + LenField(2, event_names_[i].size()));
      size_ += LenField(11, event_size_[i]);
    }
    if (s.dropped_events != 0) size_ += 1 + VarintSize(s.dropped_events);
    if (s.status != SpanStatus::kUnset) {
      if (!s.status_message.empty()) status_message_ = Text(s.status_message);
      status_size_ = (status_message_.empty() ? 0 : LenField(2, status_message_.size())) + 1 +
                     VarintSize(static_cast<uint64_t>(s.status));
      size_ += LenField(15, status_size_);
    }
  }
  SpanPlan(const SpanPlan&) = delete;
  SpanPlan& operator=(const SpanPlan&) = delete;

  size_t size() const { return size_; }

  void Write(Writer& w) const {
    const SpanRecord& s = s_;
    w.Len(1, 16);
    w.BigEndian(s.trace_id.hi);
    w.BigEndian(s.trace_id.lo);
    w.Len(2, 8);
    w.BigEndian(s.span_id);
    if (!s.trace_state.empty()) w.Raw(3, trace_state_);
    if (s.parent_span_id != 0) {
      w.Len(4, 8);
      w.BigEndian(s.parent_span_id);
    }
    w.Raw(5, name_);
    w.UInt(6, static_cast<uint64_t>(s.kind));
    w.Fixed64(7, static_cast<uint64_t>(s.start_unix_ns));
    w.Fixed64(8, static_cast<uint64_t>(s.end_unix_ns));
    for (size_t i = 0; i < s.attributes.size(); ++i) {
      // KeyValue: key 1, value 2: AnyValue {string_value 1, bool_value 2, int_value 3, double_value 4}.
      const SpanValue& v = s.attributes[i].value;
      w.Len(9, kv_size_[i]);
      w.Raw(1, keys_[i]);
      w.Len(2, any_size_[i]);
      if (std::holds_alternative<std::string>(v))
        w.Raw(1, values_[i]);  // the cleaned text, checked once above
      else
        w.AnyValue(v);
    }
    if (s.dropped_attributes != 0) w.UInt(10, s.dropped_attributes);
    for (size_t i = 0; i < s.events.size(); ++i) {
      // Event: time_unix_nano 1, name 2.
      w.Len(11, event_size_[i]);
      w.Fixed64(1, static_cast<uint64_t>(s.events[i].unix_ns));
      w.Raw(2, event_names_[i]);
    }
    if (s.dropped_events != 0) w.UInt(12, s.dropped_events);
    if (s.status != SpanStatus::kUnset) {
      // Status: message 2, code 3.
      w.Len(15, status_size_);
      if (!status_message_.empty()) w.Raw(2, status_message_);
      w.UInt(3, static_cast<uint64_t>(s.status));
    }
    w.Fixed32(16, 0x1);  // W3C trace flags: sampled
  }

 private:
  static constexpr size_t kTexts = 3 + 2 * SpanRecord::kMaxAttributes + SpanRecord::kMaxEvents;
  // `s` as written: itself when ASCII (the usual case), else a cleaned copy kept here.
  std::string_view Text(std::string_view s) {
    if (Ascii(s)) return s;
    if (cleaned_.capacity() == 0) cleaned_.reserve(kTexts);  // views into it stay valid
    return cleaned_.emplace_back(llm::SanitizeUtf8(s));
  }

  const SpanRecord& s_;
  std::string_view name_, trace_state_, status_message_;
  std::array<std::string_view, SpanRecord::kMaxAttributes> keys_, values_;
  std::array<uint32_t, SpanRecord::kMaxAttributes> any_size_, kv_size_;
  std::array<std::string_view, SpanRecord::kMaxEvents> event_names_;
  std::array<uint32_t, SpanRecord::kMaxEvents> event_size_;
  size_t status_size_ = 0;
  size_t size_ = 0;
  std::vector<std::string> cleaned_;
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
  if (s.dropped_attributes != 0)
    out->append(",\"droppedAttributesCount\":").append(std::to_string(s.dropped_attributes));
  if (s.dropped_events != 0) out->append(",\"droppedEventsCount\":").append(std::to_string(s.dropped_events));
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

void AppendOtlpProtobufSpan(std::string* out, const SpanRecord& span) {
  const SpanPlan plan(span);
  const size_t at = out->size();
  out->resize(at + LenField(2, plan.size()));
  Writer w(out->data() + at);
  w.Len(2, plan.size());  // ScopeSpans.spans
  plan.Write(w);
  // The sizes and the writes agree exactly (the fuzz target checks it under ASan).
  assert(w.end() == out->data() + out->size());
}

void AppendOtlpJsonSpan(std::string* out, const SpanRecord& span) {
  out->push_back(',');
  SpanJson(out, span);
}

std::string OtlpProtobufHead(const OtlpResource& resource, size_t spans_size) {
  // ExportTraceServiceRequest {resource_spans 1: ResourceSpans {resource 1: Resource {attributes 1},
  // scope_spans 2: ScopeSpans {scope 1: InstrumentationScope {name 1, version 2}, spans 2 (the fragments)}}}.
  std::vector<SpanValue> resource_values;
  resource_values.reserve(resource.attributes.size());
  size_t res_size = 0;
  for (const auto& [k, v] : resource.attributes) {
    resource_values.emplace_back(v);
    res_size += LenField(1, KeyValueSize(k, resource_values.back()));
  }
  const size_t scope_size =
      StrField(1, resource.scope_name) + (resource.scope_version.empty() ? 0 : StrField(2, resource.scope_version));
  const size_t ss_size = LenField(1, scope_size) + spans_size;
  const size_t rs_size = LenField(1, res_size) + LenField(2, ss_size);
  // Everything but the fragments.
  std::string out(LenField(1, rs_size) - spans_size, '\0');
  Writer w(out.data());
  w.Len(1, rs_size);
  w.Len(1, res_size);
  for (size_t i = 0; i < resource_values.size(); ++i) w.KeyValue(1, resource.attributes[i].first, resource_values[i]);
  w.Len(2, ss_size);
  w.Len(1, scope_size);
  w.Str(1, resource.scope_name);
  if (!resource.scope_version.empty()) w.Str(2, resource.scope_version);
  assert(w.end() == out.data() + out.size());
  return out;
}

std::string OtlpJsonHead(const OtlpResource& resource) {
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
  return out;
}

std::string_view OtlpJsonSpans(std::string_view fragments) {
  if (!fragments.empty() && fragments.front() == ',') fragments.remove_prefix(1);
  return fragments;
}

std::string WrapOtlpProtobuf(const OtlpResource& resource, std::string_view spans) {
  std::string out = OtlpProtobufHead(resource, spans.size());
  out.append(spans);
  return out;
}

std::string WrapOtlpJson(const OtlpResource& resource, std::string_view spans) {
  std::string out = OtlpJsonHead(resource);
  out.append(OtlpJsonSpans(spans)).append(kOtlpJsonTail);
  return out;
}

std::string EncodeOtlpProtobuf(const OtlpResource& resource, const std::vector<SpanRecord>& spans) {
  std::string fragments;
  for (const auto& s : spans) AppendOtlpProtobufSpan(&fragments, s);
  return WrapOtlpProtobuf(resource, fragments);
}

std::string EncodeOtlpJson(const OtlpResource& resource, const std::vector<SpanRecord>& spans) {
  std::string fragments;
  for (const auto& s : spans) AppendOtlpJsonSpan(&fragments, s);
  return WrapOtlpJson(resource, fragments);
}

}  // namespace inferd::tracing
