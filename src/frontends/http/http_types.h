// Transport-neutral HTTP request/response types. Handlers see only these;
// Boost.Beast stays inside http_server.cc.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"

namespace inferd::http {

struct Request {
  std::string method;  // "GET", "POST", ...
  std::string path;    // decoded path, no query
  std::string query;
  std::map<std::string, std::string> headers;  // lower-case names
  std::shared_ptr<const std::string> body;     // already decompressed

  const std::string* Header(const std::string& lower_name) const {
    auto it = headers.find(lower_name);
    return it == headers.end() ? nullptr : &it->second;
  }
};

struct Response {
  int status = 200;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
};

// Completes a request: call exactly once, from any thread.
using Responder = std::function<void(Response)>;
using Handler = std::function<void(Request&&, Responder)>;

// Maps a Status to an HTTP status code (Triton's mapping: PROTOCOLS.md).
int HttpStatusOf(const Status& st);
// A JSON error response {"error": message} with the mapped status code.
Response ErrorResponse(const Status& st);

}  // namespace inferd::http
