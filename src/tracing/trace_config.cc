#include "tracing/trace_config.h"

#include <charconv>
#include <string_view>

namespace inferd::tracing {
namespace {

template <typename T>
bool ParseNumber(std::string_view s, T* out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size();
}

Status Bad(std::string_view setting, std::string_view why) {
  return Status::InvalidArgument("--trace-config " + std::string(setting) + ": " + std::string(why));
}

}  // namespace

Result<TraceConfig> ParseTraceConfig(const std::vector<std::string>& settings) {
  TraceConfig c;
  bool mode_otel = false, level_off = false, otel_settings = false;
  for (const std::string& raw : settings) {
    std::string_view s = raw, scope;
    const size_t comma = s.find(',');
    const size_t eq = s.find('=');
    if (comma != std::string_view::npos && (eq == std::string_view::npos || comma < eq)) {
      scope = s.substr(0, comma);
      s.remove_prefix(comma + 1);
    }
    const size_t eq2 = s.find('=');
    if (eq2 == std::string_view::npos || eq2 == 0) return Bad(raw, "expected <setting>=<value>");
    const std::string_view key = s.substr(0, eq2), value = s.substr(eq2 + 1);
    if (scope.empty()) {
      if (key == "mode") {
        if (value == "opentelemetry") {
          mode_otel = true;
        } else if (value == "triton") {
          return Bad(raw, "mode triton (trace files) is not supported; use mode=opentelemetry");
        } else {
          return Bad(raw, "mode is opentelemetry");
        }
      } else if (key == "rate") {
        if (!ParseNumber(value, &c.rate)) return Bad(raw, "rate is a whole number >= 0");
      } else if (key == "count") {
        if (!ParseNumber(value, &c.count) || c.count < -1) return Bad(raw, "count is -1 or a whole number >= 0");
      } else if (key == "level") {
        if (value == "OFF") {
          level_off = true;
        } else if (value == "TIMESTAMPS") {
          level_off = false;
        } else if (value == "TENSORS") {
          c.notes.push_back("level=TENSORS is accepted and ignored: traces record timestamps, not tensors");
        } else {
          return Bad(raw, "level is OFF, TIMESTAMPS or TENSORS");
        }
      } else {
        return Bad(raw, "unknown setting (global settings: mode, rate, count, level)");
      }
      continue;
    }
    if (scope == "triton") return Bad(raw, "Triton's trace-file settings are not supported; use mode=opentelemetry");
    if (scope != "opentelemetry") return Bad(raw, "unknown mode '" + std::string(scope) + "'");
    otel_settings = true;
    if (key == "url") {
      c.url = std::string(value);
      if (auto a = ParseCollectorUrl(c.url); !a.ok()) return Bad(raw, a.status().message());
    } else if (key == "resource") {
      const size_t e = value.find('=');
      if (e == std::string_view::npos || e == 0) return Bad(raw, "resource is <key>=<value>");
      const std::string k(value.substr(0, e)), v(value.substr(e + 1));
      bool replaced = false;
      for (auto& [rk, rv] : c.resource) {
        if (rk == k) {
          rv = v;
          replaced = true;
        }
      }
      if (!replaced) c.resource.emplace_back(k, v);
    } else if (key == "protocol") {
      if (value == "http/protobuf") {
        c.encoding = TraceConfig::Encoding::kProtobuf;
      } else if (value == "http/json") {
        c.encoding = TraceConfig::Encoding::kJson;
      } else {
        return Bad(raw, "protocol is http/protobuf or http/json (OTLP over HTTP)");
      }
    } else if (key == "bsp_max_queue_size") {
      if (!ParseNumber(value, &c.max_queue_size) || c.max_queue_size == 0 || c.max_queue_size > (1u << 24)) {
        return Bad(raw, "a whole number from 1 to 16777216");
      }
    } else if (key == "bsp_max_export_batch_size") {
      if (!ParseNumber(value, &c.max_export_batch_size) || c.max_export_batch_size == 0) {
        return Bad(raw, "a whole number >= 1");
      }
    } else if (key == "bsp_schedule_delay" || key == "export_timeout") {
      int64_t ms;
      if (!ParseNumber(value, &ms) || ms < 1 || ms > 3'600'000) return Bad(raw, "milliseconds from 1 to 3600000");
      (key == "bsp_schedule_delay" ? c.schedule_delay : c.export_timeout) = std::chrono::milliseconds(ms);
    } else {
      return Bad(raw,
                 "unknown setting (opentelemetry settings: url, resource, protocol, bsp_max_queue_size, "
                 "bsp_max_export_batch_size, bsp_schedule_delay, export_timeout)");
    }
  }
  if (c.max_export_batch_size > c.max_queue_size) {
    return Status::InvalidArgument("--trace-config: bsp_max_export_batch_size (" +
                                   std::to_string(c.max_export_batch_size) + ") exceeds bsp_max_queue_size (" +
                                   std::to_string(c.max_queue_size) + ")");
  }
  if (!mode_otel && (otel_settings || !settings.empty()) && !level_off) {
    return Status::InvalidArgument(
        "--trace-config: tracing needs mode=opentelemetry (--trace-config mode=opentelemetry)");
  }
  c.enabled = mode_otel && !level_off;
  return c;
}

Result<CollectorAddress> ParseCollectorUrl(const std::string& url) {
  std::string_view s = url;
  if (s.starts_with("https://")) return Status::InvalidArgument("https collectors are not supported (use http://)");
  if (s.starts_with("http://")) s.remove_prefix(7);
  if (s.find("://") != std::string_view::npos) return Status::InvalidArgument("the url's scheme must be http");
  CollectorAddress a;
  const size_t slash = s.find('/');
  std::string_view hostport = s.substr(0, slash);
  if (slash != std::string_view::npos) a.path = std::string(s.substr(slash));
  if (hostport.empty()) return Status::InvalidArgument("the url has no host");
  std::string_view host = hostport;
  if (hostport.front() == '[') {  // [v6]:port
    const size_t close = hostport.find(']');
    if (close == std::string_view::npos) return Status::InvalidArgument("the url's IPv6 host has no ']'");
    host = hostport.substr(1, close - 1);
    hostport.remove_prefix(close + 1);
    if (!hostport.empty() && hostport.front() != ':') return Status::InvalidArgument("unexpected text after ']'");
    if (!hostport.empty()) hostport.remove_prefix(1);
    if (!hostport.empty() && !ParseNumber(hostport, &a.port)) return Status::InvalidArgument("invalid port");
  } else if (const size_t colon = hostport.rfind(':'); colon != std::string_view::npos) {
    host = hostport.substr(0, colon);
    if (!ParseNumber(hostport.substr(colon + 1), &a.port)) return Status::InvalidArgument("invalid port");
  }
  if (host.empty() || a.port == 0) return Status::InvalidArgument("the url needs a host and a port from 1 to 65535");
  for (char ch : host) {
    if (ch <= ' ' || ch == '/' || ch == '?' || ch == '#' || ch == '@' || ch > '~') {
      return Status::InvalidArgument("invalid character in the url's host");
    }
  }
  for (char ch : a.path) {
    if (ch <= ' ' || ch > '~') return Status::InvalidArgument("invalid character in the url's path");
  }
  a.host = std::string(host);
  return a;
}

}  // namespace inferd::tracing
