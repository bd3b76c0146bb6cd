// HttpClient: a minimal blocking HTTP/1.1 client with keep-alive, for the
// load generator. It handles Content-Length responses (what inferd, uvicorn
// and nginx send); chunked responses are reported as errors.
//
// Thread-safety: one client per thread.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"

namespace inferd::bench {

struct HttpResult {
  int status = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
};

class HttpClient {
 public:
  HttpClient(std::string host, uint16_t port) : host_(std::move(host)), port_(port) {}
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

  std::string host_;
  uint16_t port_;
  int fd_ = -1;
  std::string buf_;  // bytes read past the previous response
};

// Splits "http://host:port" into host and port (default 80).
Result<std::pair<std::string, uint16_t>> ParseUrl(const std::string& url);

}  // namespace inferd::bench
