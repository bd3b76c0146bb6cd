// The web console's HTTP routes (docs/console.md), in front of the API
// handler on the API port:
//   GET /                       302 to /console/
//   GET /console, /console/     the console's page (static/index.html)
//   GET /console/<file>         its scripts and styles (ETag; 304 on If-None-Match)
//   GET /console/api/info       what the console shows and needs (server, tracing, cluster, auth)
//   GET /console/api/live       the charts' ring buffers (console/live_stats.h); ?model=M&points=N
//   GET /console/api/traces     the last traced requests as OTLP JSON; ?limit=N
// Everything else goes to `api` unchanged. The page calls the same REST
// routes as any client (KServe v2, labels, traffic, rollouts, jobs,
// OpenAI): what they allow, the console allows. The static files need no
// token (they hold no data); info and live are read like statistics (a
// token only with --auth-all-routes), traces like a management route.
//
// Thread-safety: the handler is thread-safe. Ownership: the parts are not
// owned and must outlive the handler.
#pragma once

#include "console/live_stats.h"
#include "console/query.h"
#include "frontends/http/http_types.h"
#include "server/inference_server.h"
#include "tracing/trace_service.h"

namespace inferd::console {

struct ConsoleParts {
  InferenceServer* server = nullptr;
  const LiveStats* live = nullptr;                // null: no charts
  const tracing::TraceService* traces = nullptr;  // null: tracing is off
};

http::Handler MakeConsoleHandler(ConsoleParts parts, http::Handler api);

}  // namespace inferd::console
