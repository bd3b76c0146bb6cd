// OTLP/HTTP bodies (ExportTraceServiceRequest, opentelemetry-proto 1.x) for a
// batch of spans, in protobuf (written by hand: no OpenTelemetry SDK or its
// .proto is packaged in Debian bookworm) or in OTLP's JSON form (hex ids,
// 64-bit numbers as strings, lowerCamelCase names). proto/otlp_trace.proto
// holds the subset written here; the tests and the fuzz target parse the
// protobuf output with it. Pure functions.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/trace.h"

namespace inferd::tracing {

struct OtlpResource {
  std::vector<std::pair<std::string, std::string>> attributes;  // service.name, ...
  std::string scope_name = "inferd";
  std::string scope_version;
};

std::string EncodeOtlpProtobuf(const OtlpResource& resource, const std::vector<SpanRecord>& spans);
std::string EncodeOtlpJson(const OtlpResource& resource, const std::vector<SpanRecord>& spans);

}  // namespace inferd::tracing
