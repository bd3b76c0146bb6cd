// W3C Trace Context (https://www.w3.org/TR/trace-context/): the
// `traceparent` and `tracestate` headers (gRPC metadata keys of the same
// names) that carry a trace across processes. Pure functions, fuzzed
// (fuzz/fuzz_tracing.cc).
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"
#include "core/trace.h"

namespace inferd::tracing {

struct RemoteContext {
  TraceId trace_id;
  SpanId parent_id = 0;
  bool sampled = false;
};

// `00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>` (lower-case hex;
// all-zero ids and version ff are invalid; a later version is read by its
// first four fields, as the spec asks). Surrounding spaces and tabs are
// ignored. INVALID_ARGUMENT says what is wrong.
Result<RemoteContext> ParseTraceparent(std::string_view header);
std::string FormatTraceparent(const TraceId& trace, SpanId span, bool sampled);
// tracestate is passed on as it came when it is at most 512 characters of
// printable ASCII; otherwise dropped ("" returned), as the spec allows.
std::string SanitizeTracestate(std::string_view header);

std::string HexTraceId(const TraceId& id);  // 32 lower-case hex digits
std::string HexSpanId(SpanId id);           // 16

}  // namespace inferd::tracing
