// The HTTP side of tracing and the access log (docs/observability.md): each
// request's root span (inference routes, when sampled or asked for by a
// sampled traceparent), the traceparent header its answer returns, and its
// access-log line, written when the last part of the answer is handed over.
#include <array>
#include <string_view>

#include "frontends/http/router.h"

namespace inferd::http {
namespace {

// The first segments of a path, as views (no allocation: this runs for every request while observing).
struct PathParts {
  std::array<std::string_view, 6> seg;
  size_t n = 0;
  explicit PathParts(std::string_view path) {
    while (!path.empty() && n < seg.size()) {
      const size_t start = path.find_first_not_of('/');
      if (start == std::string_view::npos) break;
      path.remove_prefix(start);
      const size_t end = path.find('/');
      seg[n++] = path.substr(0, end);
      if (end == std::string_view::npos) break;
      path.remove_prefix(end);
    }
    last = n == 0 ? std::string_view() : seg[n - 1];
    if (n == seg.size() && path.find('/') != std::string_view::npos) {
      last = path.substr(path.rfind('/') + 1);  // a longer path: its last segment
    }
  }
  std::string_view last;
};

// Routes that run a model (the ones traced): POST .../infer, .../generate[_stream], TF Serving's
// :predict/:classify/:regress, and the OpenAI routes.
bool IsInferenceRoute(const Request& req, const PathParts& p) {
  if (req.method != "POST" || p.n == 0) return false;
  if (p.seg[0] == "v2") return p.last == "infer" || p.last == "generate" || p.last == "generate_stream";
  if (p.seg[0] != "v1") return false;
  if (p.n >= 2 && (p.seg[1] == "chat" || p.seg[1] == "completions" || p.seg[1] == "embeddings")) return true;
  return p.n >= 3 && p.seg[1] == "models" && p.last.find(':') != std::string_view::npos;
}

// The model a /v2/models/{m}/... or /v1/models/{m}... path names ("" otherwise: OpenAI's is in the body).
std::string ModelOfPath(const PathParts& p) {
  if (p.n < 3 || p.seg[1] != "models" || (p.seg[0] != "v2" && p.seg[0] != "v1")) return {};
  std::string_view m = p.seg[2];
  if (p.seg[0] == "v1") m = m.substr(0, m.find(':'));
  if (m.find('%') == std::string_view::npos) return std::string(m);
  auto decoded = SplitPath(std::string(m));  // %XX escapes
  return decoded.empty() ? std::string() : decoded.front();
}

bool EqualsLower(std::string_view name, std::string_view lower) {
  if (name.size() != lower.size()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i] >= 'A' && name[i] <= 'Z' ? static_cast<char>(name[i] - 'A' + 'a') : name[i];
    if (c != lower[i]) return false;
  }
  return true;
}

struct Observed {
  tracing::ObservedRequest request;
  tracing::AccessRecord record;
  bool started = false;  // the first part went out
};

}  // namespace

void ObserveRequest(const tracing::RequestObserver& observer, Request&& req, Responder respond, const Handler& route) {
  const PathParts parts(req.path);
  const std::string* traceparent = req.Header("traceparent");
  const std::string* tracestate = req.Header("tracestate");
  auto decision = observer.Decide(IsInferenceRoute(req, parts), traceparent ? *traceparent : std::string_view(),
                                  tracestate ? *tracestate : std::string_view());
  if (!observer.Observes(decision)) return route(std::move(req), std::move(respond));  // not traced, no log
  auto state = std::make_shared<Observed>();
  observer.Start(state->request, std::move(decision), req.received);
  req.trace = state->request.context;
  tracing::AccessRecord& rec = state->record;
  rec.protocol = "http";
  rec.method = req.method;
  rec.target = req.path;  // the query string is never logged (it may carry secrets)
  rec.model = ModelOfPath(parts);
  rec.client = req.client;
  rec.bytes_in = req.body ? req.body->size() : 0;
  route(std::move(req), [state, &observer, respond = std::move(respond)](Response&& r) {
    if (!state->started) {
      state->started = true;
      state->record.status = r.status;
      if (state->record.model.empty()) state->record.model = std::move(r.model);  // OpenAI's: named in the body
      for (const auto& [name, value] : r.headers) {
        if (EqualsLower(name, "inferd-model-version")) state->record.version = value;
      }
      if (!state->request.traceparent.empty()) {
        // A peer's answer relayed (cluster mode) carries the peer's: this node's span is the client's parent.
        std::erase_if(r.headers, [](const auto& h) { return EqualsLower(h.first, "traceparent"); });
        r.headers.emplace_back("traceparent", std::move(state->request.traceparent));  // needed once
      }
    }
    state->record.bytes_out += r.body.size();
    if (r.more) return respond(std::move(r));
    const TimePoint end = std::chrono::steady_clock::now();
    respond(std::move(r));  // the answer goes first; the span and log line after it (off its latency)
    const int status = state->record.status;
    state->record.failed = status >= 400;
    const Status error =
        state->record.failed ? Status(StatusCode::kInternal, "HTTP " + std::to_string(status)) : Status::OK();
    observer.Finish(state->request, std::move(state->record), error, end);
  });
}

}  // namespace inferd::http
