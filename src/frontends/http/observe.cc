// The HTTP side of tracing and the access log (docs/observability.md): each
// request's root span (inference routes, when sampled or asked for by a
// sampled traceparent), the traceparent header its answer returns, and its
// access-log line, written when the last part of the answer is handed over.
#include <string_view>

#include "frontends/http/router.h"

namespace inferd::http {
namespace {

// Routes that run a model (the ones traced): POST .../infer, .../generate[_stream], TF Serving's
// :predict/:classify/:regress, and the OpenAI routes.
bool IsInferenceRoute(const Request& req, const std::vector<std::string>& parts) {
  if (req.method != "POST" || parts.empty()) return false;
  const std::string& last = parts.back();
  if (parts[0] == "v2") return last == "infer" || last == "generate" || last == "generate_stream";
  if (parts[0] != "v1") return false;
  if (parts.size() >= 2 && (parts[1] == "chat" || parts[1] == "completions" || parts[1] == "embeddings")) return true;
  const size_t colon = last.rfind(':');
  return colon != std::string::npos && parts.size() >= 3 && parts[1] == "models";
}

// The model a /v2/models/{m}/... or /v1/models/{m}... path names ("" otherwise: OpenAI's is in the body).
std::string ModelOfPath(const std::vector<std::string>& parts) {
  if (parts.size() < 3 || parts[1] != "models") return {};
  if (parts[0] == "v2") return parts[2];
  if (parts[0] != "v1") return {};
  const std::string& m = parts[2];
  const size_t colon = m.find(':');
  return colon == std::string::npos ? m : m.substr(0, colon);
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
  const std::vector<std::string> parts = SplitPath(req.path);
  const std::string* traceparent = req.Header("traceparent");
  const std::string* tracestate = req.Header("tracestate");
  auto state = std::make_shared<Observed>();
  state->request = observer.Start(IsInferenceRoute(req, parts), traceparent ? *traceparent : std::string_view(),
                                  tracestate ? *tracestate : std::string_view(), req.received);
  req.trace = state->request.context;
  tracing::AccessRecord& rec = state->record;
  rec.protocol = "http";
  rec.method = req.method;
  rec.target = req.path;  // the query string is never logged (it may carry secrets)
  rec.model = ModelOfPath(parts);
  rec.client = req.client;
  rec.bytes_in = req.body ? req.body->size() : 0;
  route(std::move(req), [state, &observer, respond = std::move(respond)](Response r) {
    if (!state->started) {
      state->started = true;
      state->record.status = r.status;
      for (const auto& [name, value] : r.headers) {
        if (EqualsLower(name, "inferd-model-version")) state->record.version = value;
      }
      if (!state->request.traceparent.empty()) {
        // A peer's answer relayed (cluster mode) carries the peer's: this node's span is the client's parent.
        std::erase_if(r.headers, [](const auto& h) { return EqualsLower(h.first, "traceparent"); });
        r.headers.emplace_back("traceparent", state->request.traceparent);
      }
    }
    state->record.bytes_out += r.body.size();
    if (!r.more) {
      const int status = state->record.status;
      state->record.failed = status >= 400;
      const Status error =
          state->record.failed ? Status(StatusCode::kInternal, "HTTP " + std::to_string(status)) : Status::OK();
      observer.Finish(state->request, std::move(state->record), error);
    }
    respond(std::move(r));
  });
}

}  // namespace inferd::http
