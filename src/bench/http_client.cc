#include "bench/http_client.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>

namespace inferd::bench {

class TlsClientContext {
 public:
  explicit TlsClientContext(SSL_CTX* ctx) : ctx_(ctx) {}
  ~TlsClientContext() { SSL_CTX_free(ctx_); }
  TlsClientContext(const TlsClientContext&) = delete;
  TlsClientContext& operator=(const TlsClientContext&) = delete;
  SSL_CTX* get() const { return ctx_; }

 private:
  SSL_CTX* ctx_;
};

namespace {
std::string SslError() {
  char buf[256] = "unknown";
  if (unsigned long e = ERR_get_error(); e != 0) ERR_error_string_n(e, buf, sizeof buf);
  ERR_clear_error();
  return buf;
}
}  // namespace

Result<std::shared_ptr<TlsClientContext>> MakeTlsClientContext(const std::string& ca_file) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  if (ctx == nullptr) return Status::Internal("cannot create a TLS context: " + SslError());
  auto owned = std::make_shared<TlsClientContext>(ctx);
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  const int loaded = ca_file.empty() ? SSL_CTX_set_default_verify_paths(ctx)
                                     : SSL_CTX_load_verify_locations(ctx, ca_file.c_str(), nullptr);
  if (loaded != 1) return Status::InvalidArgument("cannot read the CA file " + ca_file + ": " + SslError());
  return owned;
}

HttpClient::~HttpClient() { Close(); }

long HttpClient::Recv(char* p, size_t n) {
  if (ssl_ != nullptr) {
    const int r = SSL_read(static_cast<SSL*>(ssl_), p, static_cast<int>(std::min<size_t>(n, 1 << 30)));
    if (r > 0) return r;
    const int e = SSL_get_error(static_cast<SSL*>(ssl_), r);
    ERR_clear_error();
    return e == SSL_ERROR_ZERO_RETURN ? 0 : -1;
  }
  ssize_t r;
  do {
    r = ::recv(fd_, p, n, 0);
  } while (r < 0 && errno == EINTR);
  return r;
}

long HttpClient::Send(const char* p, size_t n) {
  if (ssl_ != nullptr) {
    const int r = SSL_write(static_cast<SSL*>(ssl_), p, static_cast<int>(std::min<size_t>(n, 1 << 30)));
    if (r <= 0) ERR_clear_error();
    return r > 0 ? r : -1;
  }
  ssize_t r;
  do {
    r = ::send(fd_, p, n, MSG_NOSIGNAL);
  } while (r < 0 && errno == EINTR);
  return r;
}

void HttpClient::Close() {
  if (ssl_ != nullptr) SSL_free(static_cast<SSL*>(ssl_));  // no close_notify: the connection just ends
  ssl_ = nullptr;
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  buf_.clear();
}

Status HttpClient::Connect() {
  Close();
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string port = std::to_string(port_);
  if (int rc = ::getaddrinfo(host_.c_str(), port.c_str(), &hints, &res); rc != 0) {
    return Status::Unavailable("cannot resolve " + host_ + ": " + gai_strerror(rc));
  }
  Status st = Status::Unavailable("cannot connect to " + host_ + ":" + port);
  for (addrinfo* a = res; a; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) continue;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      fd_ = fd;
      st = Status::OK();
      break;
    }
    ::close(fd);
  }
  ::freeaddrinfo(res);
  if (!st.ok() || !tls_) return st;
  SSL* ssl = SSL_new(tls_->get());
  ssl_ = ssl;
  SSL_set_fd(ssl, fd_);
  SSL_set_tlsext_host_name(ssl, host_.c_str());
  SSL_set1_host(ssl, host_.c_str());  // the certificate must name the host (or its IP address)
  if (SSL_connect(ssl) != 1) {
    const std::string why = SslError();
    Close();
    return Status::Unavailable("TLS handshake with " + host_ + ":" + port + " failed: " + why);
  }
  return Status::OK();
}

Status HttpClient::SendAll(const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    const long n = Send(data.data() + off, data.size() - off);
    if (n <= 0) return Status::Unavailable(std::string("send failed: ") + std::strerror(errno));
    off += static_cast<size_t>(n);
  }
  return Status::OK();
}

Result<std::optional<ResponseFrame>> FrameResponse(std::string_view buf) {
  const size_t header_end = buf.find("\r\n\r\n");
  if (header_end == std::string_view::npos) return std::optional<ResponseFrame>();
  ResponseFrame f;
  HttpResult& r = f.head;
  std::string_view head = buf.substr(0, header_end);
  const size_t line_end = head.find("\r\n");
  std::string_view status_line = head.substr(0, line_end);
  if (status_line.size() < 12 || status_line.substr(0, 5) != "HTTP/") return Status::Internal("bad status line");
  std::from_chars(status_line.data() + 9, status_line.data() + 12, r.status);
  size_t pos = line_end == std::string_view::npos ? head.size() : line_end + 2;
  while (pos < head.size()) {
    size_t e = head.find("\r\n", pos);
    if (e == std::string_view::npos) e = head.size();
    std::string_view line = head.substr(pos, e - pos);
    pos = e + 2;
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    std::string name(line.substr(0, colon));
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    r.headers[name] = std::string(value);
  }
  if (r.headers.count("transfer-encoding")) return Status::Unimplemented("chunked responses are not supported");
  size_t length = 0;
  if (auto it = r.headers.find("content-length"); it != r.headers.end()) {
    std::from_chars(it->second.data(), it->second.data() + it->second.size(), length);
  }
  f.body_start = header_end + 4;
  if (buf.size() < f.body_start + length) return std::optional<ResponseFrame>();
  f.length = f.body_start + length;
  return std::optional<ResponseFrame>(std::move(f));
}

Result<HttpResult> HttpClient::ReadResponse() {
  auto fill = [&]() -> Status {
    char tmp[65536];
    const long n = Recv(tmp, sizeof tmp);
    if (n == 0) return Status::Unavailable("connection closed by the server");
    if (n < 0) return Status::Unavailable(std::string("recv failed: ") + std::strerror(errno));
    buf_.append(tmp, static_cast<size_t>(n));
    return Status::OK();
  };
  std::optional<ResponseFrame> frame;
  while (true) {
    INFERD_ASSIGN_OR_RETURN(frame, FrameResponse(buf_));
    if (frame) break;
    INFERD_RETURN_IF_ERROR(fill());
  }
  HttpResult r = std::move(frame->head);
  r.body = buf_.substr(frame->body_start, frame->length - frame->body_start);
  buf_.erase(0, frame->length);
  if (auto it = r.headers.find("connection"); it != r.headers.end() && it->second == "close") Close();
  return r;
}

std::string FormatRequest(const std::string& method, const std::string& path, const std::string& host,
                          const std::string& body, const std::vector<std::pair<std::string, std::string>>& headers) {
  std::string req;
  req.reserve(256 + body.size());
  req += method;
  req += ' ';
  req += path;
  req += " HTTP/1.1\r\nHost: ";
  req += host;
  req += "\r\nContent-Length: ";
  req += std::to_string(body.size());
  req += "\r\n";
  for (const auto& [k, v] : headers) {
    req += k;
    req += ": ";
    req += v;
    req += "\r\n";
  }
  req += "\r\n";
  req += body;
  return req;
}

Result<HttpResult> HttpClient::Request(const std::string& method, const std::string& path, const std::string& body,
                                       const std::vector<std::pair<std::string, std::string>>& headers) {
  const std::string req = FormatRequest(method, path, host_, body, headers);
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (fd_ < 0) INFERD_RETURN_IF_ERROR(Connect());
    Status st = SendAll(req);
    if (st.ok()) {
      auto r = ReadResponse();
      if (r.ok()) return r;
      st = r.status();
    }
    Close();  // the server may have closed an idle keep-alive connection: retry once
    if (attempt == 1) return st;
  }
  return Status::Internal("unreachable");
}

Result<std::pair<std::string, uint16_t>> ParseUrl(const std::string& url) {
  std::string_view u = url;
  uint16_t port = 80;
  if (u.rfind("http://", 0) == 0) {
    u.remove_prefix(7);
  } else if (u.rfind("https://", 0) == 0) {
    u.remove_prefix(8);
    port = 443;
  } else if (u.find("://") != std::string_view::npos) {
    return Status::InvalidArgument("only http:// and https:// URLs are supported");
  }
  if (auto slash = u.find('/'); slash != std::string_view::npos) u = u.substr(0, slash);
  std::string host(u);
  if (auto colon = u.rfind(':'); colon != std::string_view::npos) {
    host = std::string(u.substr(0, colon));
    auto [p, ec] = std::from_chars(u.data() + colon + 1, u.data() + u.size(), port);
    if (ec != std::errc() || p != u.data() + u.size()) return Status::InvalidArgument("bad port in URL '" + url + "'");
  }
  if (host.empty()) return Status::InvalidArgument("no host in URL '" + url + "'");
  return std::make_pair(host, port);
}

bool IsHttpsUrl(const std::string& url) { return url.rfind("https://", 0) == 0; }

}  // namespace inferd::bench
