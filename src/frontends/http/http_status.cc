#include "frontends/codec/kserve_v2.h"
#include "frontends/http/http_types.h"

namespace inferd::http {

int HttpStatusOf(const Status& st) {
  switch (st.code()) {
    case StatusCode::kOk:
      return 200;
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kUnavailable:
      return 503;
    case StatusCode::kDeadlineExceeded:
      return 503;
    case StatusCode::kInternal:
      return 500;
    case StatusCode::kUnimplemented:
      return 501;
    case StatusCode::kResourceExhausted:
      return 413;
    case StatusCode::kAlreadyExists:
      return 409;
    case StatusCode::kUnauthenticated:
      return 401;
    case StatusCode::kPermissionDenied:
      return 403;
    case StatusCode::kRateLimited:
      return 429;
    case StatusCode::kInvalidArgument:
    case StatusCode::kFailedPrecondition:
    case StatusCode::kCancelled:
      return 400;
  }
  return 400;
}

Response MethodNotAllowed(const Request& req, std::string_view allow) {
  Response r = ErrorResponse(Status::InvalidArgument("method " + req.method + " is not allowed on " + req.path));
  r.status = 405;
  r.headers.emplace_back("Allow", std::string(allow));
  return r;
}

Response ErrorResponse(const Status& st) {
  Response r;
  r.status = HttpStatusOf(st);
  if (r.status == 401) r.headers.emplace_back("WWW-Authenticate", "Bearer");
  // 503 is retryable (queue full, a model loading, shutting down, no copy reachable): say when to try again.
  if (r.status == 503 || r.status == 429) r.headers.emplace_back("Retry-After", "1");
  r.body = v2::EncodeError(st.message());
  return r;
}

}  // namespace inferd::http
