// Transport-neutral HTTP request/response types. Handlers see only these;
// Boost.Beast stays inside http_server.cc.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/cancellation.h"
#include "core/status.h"
#include "core/trace.h"

namespace inferd::http {

struct Request {
  std::string method;  // "GET", "POST", ...
  std::string path;    // decoded path, no query
  std::string query;
  // Lower-case names in arrival order; a repeated name keeps its last value
  // for Header(). A flat list: requests carry a handful of headers.
  std::vector<std::pair<std::string, std::string>> headers;
  std::shared_ptr<const std::string> body;  // already decompressed
  // Raised when the client closes its connection before the answer is sent;
  // handlers pass it on to the requests they start.
  std::shared_ptr<const Cancellation> cancellation;
  // When the server began to handle it (the whole message read).
  std::chrono::steady_clock::time_point received{};
  // The client's address:port (only with HttpServerOptions::client_address: the access log).
  std::string client;
  // Tracing: the request's root span, set by the API handler when the request
  // is traced; inference handlers pass it on (InferRequest::trace).
  std::shared_ptr<const TraceParent> trace;

  const std::string* Header(std::string_view lower_name) const {
    for (auto it = headers.rbegin(); it != headers.rend(); ++it)
      if (it->first == lower_name) return &it->second;
    return nullptr;
  }
};

struct Response {
  int status = 200;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  // Set on each part of an answer sent in parts (server-sent events) but the
  // last. The first part's status and headers start the response, sent with
  // chunked transfer encoding; later parts add only their body, the last
  // (`more` false) ends it. A response whose first part is its last is sent
  // whole, with Content-Length.
  bool more = false;
  // The model that answered, when the path does not name it (OpenAI's routes name it in the body): for the access
  // log and the request's span (frontends/http/observe.cc reads it off the first part). Never sent.
  std::string model;
};

// Answers a request: zero or more parts with `more` set, then exactly one
// call without; from any thread, in order (calls from different threads must
// be ordered by the caller).
using Responder = std::function<void(Response)>;
using Handler = std::function<void(Request&&, Responder)>;

// One server-sent event `data: <payload>\n\n` (text/event-stream, no-cache); `more` as in Response.
Response ServerSentEvent(std::string_view payload, bool more);
inline constexpr std::string_view kEventStreamType = "text/event-stream; charset=utf-8";

// Maps a Status to an HTTP status code (Triton's mapping: PROTOCOLS.md).
int HttpStatusOf(const Status& st);
// A JSON error response {"error": message} with the mapped status code.
Response ErrorResponse(const Status& st);
// 405 with {"error": "method M is not allowed on PATH"} and the `Allow`
// header listing the methods the route takes (e.g. "GET, HEAD").
Response MethodNotAllowed(const Request& req, std::string_view allow);
// GET or HEAD (a HEAD answer is the GET answer without its body).
inline bool IsGet(const Request& req) { return req.method == "GET" || req.method == "HEAD"; }
inline constexpr std::string_view kAllowGet = "GET, HEAD";
inline constexpr std::string_view kAllowPost = "POST";

}  // namespace inferd::http
