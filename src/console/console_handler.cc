#include "console/console_handler.h"

#include <charconv>

#include "console/assets.h"
#include "core/json_text.h"
#include "tracing/otlp_encoder.h"

namespace inferd::console {
namespace {

constexpr std::string_view kPrefix = "/console";
constexpr size_t kMaxPoints = 3600;  // --console-history-secs' largest value
constexpr size_t kDefaultTraces = 20;

// Every answer of the console's own routes: its page loads nothing from elsewhere and runs no inline script.
http::Response Hardened(http::Response r) {
  r.headers.emplace_back("Content-Security-Policy",
                         "default-src 'self'; img-src 'self' data: blob:; style-src 'self'; script-src 'self'; "
                         "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'");
  r.headers.emplace_back("X-Content-Type-Options", "nosniff");
  r.headers.emplace_back("Referrer-Policy", "no-referrer");
  return r;
}

http::Response Redirect(std::string location) {
  http::Response r;
  r.status = 302;
  r.content_type = "text/plain; charset=utf-8";
  r.headers.emplace_back("Location", std::move(location));
  r.body = "see /console/\n";
  return r;
}

size_t NumberParam(std::string_view query, std::string_view key, size_t fallback, size_t max) {
  const std::string v = QueryValue(query, key);
  size_t n = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (v.empty() || ec != std::errc() || end != v.data() + v.size()) return fallback;
  return std::min(n, max);
}

// The request's `Authorization` value ("" when absent), as the API's routes pass it to Authorize.
std::string_view Authorization(const http::Request& req) {
  const std::string* a = req.Header("authorization");
  return a ? std::string_view(*a) : std::string_view();
}

http::Response ServeAsset(const http::Request& req, std::string_view path) {
  const Asset* a = FindConsoleAsset(path);
  if (a == nullptr) return http::ErrorResponse(Status::NotFound("no console file " + std::string(path)));
  http::Response r;
  r.headers.emplace_back("ETag", std::string(a->etag));
  r.headers.emplace_back("Cache-Control", "no-cache");  // revalidate: a new inferd serves new files
  const std::string* match = req.Header("if-none-match");
  if (match != nullptr && *match == a->etag) {
    r.status = 304;
    r.content_type.clear();
    return r;
  }
  r.content_type = std::string(a->content_type);
  r.body = std::string(a->body);
  return r;
}

http::Response Info(const ConsoleParts& p) {
  const ServerMetadata meta = p.server->GetServerMetadata();
  std::string out = "{\"server\":{\"name\":";
  json::AppendEscaped(&out, meta.name);
  out.append(",\"version\":");
  json::AppendEscaped(&out, meta.version);
  out.append("},\"live\":");
  if (p.live != nullptr) {
    out.append("{\"interval_ms\":").append(std::to_string(p.live->options().interval.count()));
    out.append(",\"history\":").append(std::to_string(p.live->options().history)).append("}");
  } else {
    out.append("null");
  }
  out.append(",\"tracing\":").append(p.traces != nullptr ? "true" : "false");
  out.append(",\"recent_traces\":")
      .append(std::to_string(p.traces != nullptr ? p.traces->recent().capacity() : size_t{0}));
  out.append(",\"cluster\":").append(p.server->admin().clustered() ? "true" : "false");
  // Whether calls without a token are refused: management ones; metadata and inference too (a tokens file,
  // or --auth-all-routes).
  out.append(",\"auth\":{\"management\":")
      .append(p.server->front_end().access->Protects(auth::Need::kModels) ? "true" : "false");
  out.append(",\"all_routes\":")
      .append(p.server->front_end().access->Protects(auth::Need::kRead) ? "true" : "false")
      .append("}}");
  http::Response r;
  r.body = std::move(out);
  r.headers.emplace_back("Cache-Control", "no-store");
  return r;
}

http::Response Traces(const ConsoleParts& p, const http::Request& req) {
  if (p.traces == nullptr) {
    return http::ErrorResponse(Status::NotFound(
        "tracing is off: start inferd with --trace-config mode=opentelemetry (docs/observability.md)"));
  }
  const size_t limit = NumberParam(req.query, "limit", kDefaultTraces, p.traces->recent().capacity());
  tracing::OtlpResource resource;
  resource.attributes = p.traces->config().resource;
  http::Response r;
  r.body = tracing::EncodeOtlpJson(resource, p.traces->recent().Snapshot(limit));
  r.headers.emplace_back("Cache-Control", "no-store");
  return r;
}

// The console's own routes; false when `req` is not one of them.
bool Route(const ConsoleParts& p, const http::Request& req, http::Response* out) {
  const std::string_view path = req.path;
  if (path == "/") {
    if (!http::IsGet(req)) return false;  // the API's answer (no route)
    *out = Redirect("/console/");
    return true;
  }
  if (path.substr(0, kPrefix.size()) != kPrefix) return false;
  const std::string_view rest = path.substr(kPrefix.size());
  if (!rest.empty() && rest[0] != '/') return false;  // e.g. /consoles: not ours
  if (!http::IsGet(req)) {
    *out = http::MethodNotAllowed(req, http::kAllowGet);
    return true;
  }
  if (rest.empty()) {
    *out = Redirect("/console/");
    return true;
  }
  if (rest.substr(0, 5) == "/api/") {
    const std::string_view api = rest.substr(5);
    // Info says how to authenticate (health's rule); traces show other callers' requests (the management
    // scope); the charts are statistics (read).
    const auth::Need need = api == "info"     ? auth::Need::kHealth
                            : api == "traces" ? auth::Need::kModels
                                              : auth::Need::kRead;
    if (Status st = p.server->front_end().access->Check(Authorization(req), need); !st.ok()) {
      *out = http::ErrorResponse(st);
    } else if (api == "info") {
      *out = Info(p);
    } else if (api == "live") {
      if (p.live == nullptr) {
        *out = http::ErrorResponse(Status::NotFound("the console's charts are off"));
      } else {
        *out = http::Response();
        out->body =
            p.live->Json(QueryValue(req.query, "model"), NumberParam(req.query, "points", kMaxPoints, kMaxPoints));
        out->headers.emplace_back("Cache-Control", "no-store");
      }
    } else if (api == "traces") {
      *out = Traces(p, req);
    } else {
      *out = http::ErrorResponse(Status::NotFound("no console route " + std::string(path)));
    }
    return true;
  }
  *out = ServeAsset(req, rest == "/" ? std::string_view("index.html") : rest.substr(1));
  return true;
}

}  // namespace

http::Handler MakeConsoleHandler(ConsoleParts parts, http::Handler api) {
  return [parts, api = std::move(api)](http::Request&& req, http::Responder respond) {
    http::Response r;
    if (!Route(parts, req, &r)) return api(std::move(req), std::move(respond));
    respond(Hardened(std::move(r)));
  };
}

}  // namespace inferd::console
