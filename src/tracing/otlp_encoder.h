// OTLP/HTTP bodies (ExportTraceServiceRequest, opentelemetry-proto 1.x) for a
// batch of spans, in protobuf (written by hand: no OpenTelemetry SDK or its
// .proto is packaged in Debian bookworm) or in OTLP's JSON form (hex ids,
// 64-bit numbers as strings, lowerCamelCase names). proto/otlp_trace.proto
// holds the subset written here; the tests and the fuzz target parse the
// protobuf output with it. Pure functions.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/trace.h"

namespace inferd::tracing {

struct OtlpResource {
  std::vector<std::pair<std::string, std::string>> attributes;  // service.name, ...
  std::string scope_name = "inferd";
  std::string scope_version;
};

// One span as a fragment of a body's only ScopeSpans, appended to `out`
// (what a request's trace buffer does with its spans when the request is
// done). Protobuf: the field `spans` (tag, length, the Span message);
// fragments concatenate. JSON: a comma and the span's object; WrapOtlpJson
// drops the first comma.
void AppendOtlpProtobufSpan(std::string* out, const SpanRecord& span);
void AppendOtlpJsonSpan(std::string* out, const SpanRecord& span);
// The body around fragments of the same encoding (any number, concatenated).
std::string WrapOtlpProtobuf(const OtlpResource& resource, std::string_view spans);
std::string WrapOtlpJson(const OtlpResource& resource, std::string_view spans);
// The same body in parts, for sending without copying the fragments:
// protobuf: head + fragments; JSON: head + OtlpJsonSpans(fragments) + tail.
std::string OtlpProtobufHead(const OtlpResource& resource, size_t spans_size);
std::string OtlpJsonHead(const OtlpResource& resource);
std::string_view OtlpJsonSpans(std::string_view fragments);
inline constexpr std::string_view kOtlpJsonTail = "]}]}]}";

// A whole body at once (Wrap of each span's fragment).
std::string EncodeOtlpProtobuf(const OtlpResource& resource, const std::vector<SpanRecord>& spans);
std::string EncodeOtlpJson(const OtlpResource& resource, const std::vector<SpanRecord>& spans);

}  // namespace inferd::tracing
