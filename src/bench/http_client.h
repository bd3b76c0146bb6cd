// HttpClient: a minimal blocking HTTP/1.1 client with keep-alive, for the
// load generator, over TCP or TLS (https:// URLs: OpenSSL, the server's
// certificate checked against a CA file and its name). It handles
// Content-Length responses (what inferd, uvicorn and nginx send); chunked
// responses are reported as errors.
//
// Thread-safety: one client per thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace inferd::bench {

// An OpenSSL client context (TLS 1.2+, peer verification on), shared by the
// clients of one run. Opaque here: only http_client.cc includes OpenSSL.
class TlsClientContext;
// `ca_file` "": the system's CAs.
Result<std::shared_ptr<TlsClientContext>> MakeTlsClientContext(const std::string& ca_file);

struct HttpResult {
  int status = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
};

class HttpClient {
 public:
  // `tls` null: plain TCP.
  HttpClient(std::string host, uint16_t port, std::shared_ptr<TlsClientContext> tls = nullptr)
      : host_(std::move(host)), port_(port), tls_(std::move(tls)) {}
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Sends one request on the kept-alive connection (reconnecting once if the
  // server had closed it) and reads the whole response.
  Result<HttpResult> Request(const std::string& method, const std::string& path, const std::string& body,
                             const std::vector<std::pair<std::string, std::string>>& headers = {});

 private:
  Status Connect();
  Status SendAll(const std::string& data);
  Result<HttpResult> ReadResponse();
  void Close();

  // One read or write of at most `n` bytes over TCP or TLS: bytes moved, 0 at the end, -1 on an error.
  long Recv(char* p, size_t n);
  long Send(const char* p, size_t n);

  std::string host_;
  uint16_t port_;
  std::shared_ptr<TlsClientContext> tls_;
  void* ssl_ = nullptr;  // SSL*, with tls_
  int fd_ = -1;
  std::string buf_;  // bytes read past the previous response
};

// The bytes of one HTTP/1.1 request with a Content-Length body.
std::string FormatRequest(const std::string& method, const std::string& path, const std::string& host,
                          const std::string& body, const std::vector<std::pair<std::string, std::string>>& headers);

// Where one response starts and ends in a receive buffer.
struct ResponseFrame {
  size_t body_start = 0;
  size_t length = 0;  // head and body: the bytes this response takes
  HttpResult head;    // status and headers; body left empty
};
// Frames the response at the start of `buf`: nullopt while its head or body
// is still incomplete; an error for what is not an HTTP/1.1 response with a
// Content-Length (or no) body.
Result<std::optional<ResponseFrame>> FrameResponse(std::string_view buf);

// Splits "http://host:port" or "https://host:port" into host and port (default 80 / 443).
Result<std::pair<std::string, uint16_t>> ParseUrl(const std::string& url);
bool IsHttpsUrl(const std::string& url);

}  // namespace inferd::bench
