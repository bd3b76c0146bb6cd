#include "tracing/trace_context.h"

#include <cstring>

namespace inferd::tracing {
namespace {

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;  // upper case is invalid in traceparent
}

bool ParseHex64(std::string_view s, uint64_t* out) {
  uint64_t v = 0;
  for (char c : s) {
    const int d = HexDigit(c);
    if (d < 0) return false;
    v = (v << 4) | static_cast<uint64_t>(d);
  }
  *out = v;
  return true;
}

// 16 lowercase hex digits of `v` at `p`.
void WriteHex64(char* p, uint64_t v) {
  static constexpr char kDigits[] = "0123456789abcdef";
  for (int i = 15; i >= 0; --i, v >>= 4) p[i] = kDigits[v & 0xf];
}

void AppendHex64(std::string* out, uint64_t v) {
  char buf[16];
  WriteHex64(buf, v);
  out->append(buf, sizeof buf);
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

Result<RemoteContext> ParseTraceparent(std::string_view header) {
  const std::string_view s = Trim(header);
  // version(2) '-' trace-id(32) '-' parent-id(16) '-' flags(2) = 55 characters.
  if (s.size() < 55 || s[2] != '-' || s[35] != '-' || s[52] != '-') {
    return Status::InvalidArgument("traceparent: expected 00-<32 hex>-<16 hex>-<2 hex>");
  }
  uint64_t version, flags;
  if (!ParseHex64(s.substr(0, 2), &version) || version == 0xff) {
    return Status::InvalidArgument("traceparent: invalid version");
  }
  // Version 00 is exactly 55 characters; a later one may add fields after a '-'.
  if (version == 0 ? s.size() != 55 : (s.size() > 55 && s[55] != '-')) {
    return Status::InvalidArgument("traceparent: unexpected characters after the flags");
  }
  RemoteContext ctx;
  if (!ParseHex64(s.substr(3, 16), &ctx.trace_id.hi) || !ParseHex64(s.substr(19, 16), &ctx.trace_id.lo) ||
      !ctx.trace_id.valid()) {
    return Status::InvalidArgument("traceparent: invalid trace id");
  }
  if (!ParseHex64(s.substr(36, 16), &ctx.parent_id) || ctx.parent_id == 0) {
    return Status::InvalidArgument("traceparent: invalid parent id");
  }
  if (!ParseHex64(s.substr(53, 2), &flags)) return Status::InvalidArgument("traceparent: invalid flags");
  ctx.sampled = (flags & 1) != 0;
  return ctx;
}

std::string FormatTraceparent(const TraceId& trace, SpanId span, bool sampled) {
  // 00-<32 hex>-<16 hex>-<2 hex>: written in place, one allocation.
  char buf[55];
  std::memcpy(buf, "00-", 3);
  WriteHex64(buf + 3, trace.hi);
  WriteHex64(buf + 19, trace.lo);
  buf[35] = '-';
  WriteHex64(buf + 36, span);
  std::memcpy(buf + 52, sampled ? "-01" : "-00", 3);
  return std::string(buf, sizeof buf);
}

std::string SanitizeTracestate(std::string_view header) {
  const std::string_view s = Trim(header);
  if (s.size() > 512) return {};
  for (char c : s) {
    if (c < 0x20 || c > 0x7e) return {};
  }
  return std::string(s);
}

std::string HexTraceId(const TraceId& id) {
  std::string out;
  out.reserve(32);
  AppendHex64(&out, id.hi);
  AppendHex64(&out, id.lo);
  return out;
}

std::string HexSpanId(SpanId id) {
  std::string out;
  out.reserve(16);
  AppendHex64(&out, id);
  return out;
}

}  // namespace inferd::tracing
