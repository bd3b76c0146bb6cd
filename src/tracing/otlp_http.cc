#include "tracing/otlp_http.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>

namespace inferd::tracing {
namespace {

int MillisLeft(std::chrono::steady_clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  return left.count() <= 0 ? 0 : static_cast<int>(std::min<int64_t>(left.count(), 1 << 30));
}

bool WaitFd(int fd, short events, std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int ms = MillisLeft(deadline);
    if (ms == 0) return false;
    const int r = ::poll(&p, 1, ms);
    if (r > 0) return true;
    if (r == 0) return false;
    if (errno != EINTR) return false;
  }
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

}  // namespace

void OtlpHttpClient::Close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  pending_.clear();
}

Status OtlpHttpClient::Connect(Deadline deadline) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string port = std::to_string(address_.port);
  if (int rc = ::getaddrinfo(address_.host.c_str(), port.c_str(), &hints, &res); rc != 0) {
    return Status::Unavailable("cannot resolve the collector " + address_.host + ": " + gai_strerror(rc));
  }
  Status last = Status::Unavailable("no address for the collector " + address_.host);
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    const int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) continue;
    int rc = ::connect(fd, ai->ai_addr, ai->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      if (WaitFd(fd, POLLOUT, deadline)) {
        int err = 0;
        socklen_t len = sizeof err;
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
        rc = err == 0 ? 0 : -1;
        errno = err;
      } else {
        errno = ETIMEDOUT;
      }
    }
    if (rc == 0) {
      const int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      fd_ = fd;
      ::freeaddrinfo(res);
      return Status::OK();
    }
    last = Status::Unavailable("cannot connect to the collector " + address_.host + ":" + port + ": " +
                               std::strerror(errno));
    ::close(fd);
  }
  ::freeaddrinfo(res);
  return last;
}

Status OtlpHttpClient::SendAll(std::string_view data, bool more, Deadline deadline) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL | (more ? MSG_MORE : 0));
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!WaitFd(fd_, POLLOUT, deadline)) return Status::Unavailable("the collector did not take the spans in time");
      continue;
    }
    return Status::Unavailable(std::string("sending to the collector: ") + std::strerror(errno));
  }
  return Status::OK();
}

Result<size_t> OtlpHttpClient::ReadSome(char* buf, size_t n, Deadline deadline) {
  for (;;) {
    const ssize_t r = ::recv(fd_, buf, n, 0);
    if (r >= 0) return static_cast<size_t>(r);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!WaitFd(fd_, POLLIN, deadline)) return Status::Unavailable("the collector did not answer in time");
      continue;
    }
    return Status::Unavailable(std::string("reading the collector's answer: ") + std::strerror(errno));
  }
}

Result<int> OtlpHttpClient::ReadAnswer(Deadline deadline, bool* keep) {
  constexpr size_t kMaxHead = 64 * 1024, kMaxBody = 4 * 1024 * 1024;
  char buf[8192];
  size_t head_end;
  while ((head_end = pending_.find("\r\n\r\n")) == std::string::npos) {
    if (pending_.size() > kMaxHead) return Status::Unavailable("the collector's answer head is too long");
    auto n = ReadSome(buf, sizeof buf, deadline);
    if (!n.ok()) return n.status();
    if (*n == 0) return Status::Unavailable("the collector closed the connection");
    pending_.append(buf, *n);
  }
  const std::string head = pending_.substr(0, head_end);
  pending_.erase(0, head_end + 4);
  // "HTTP/1.1 200 OK"
  if (head.size() < 12 || head.compare(0, 5, "HTTP/") != 0) return Status::Unavailable("not an HTTP answer");
  int code = 0;
  const size_t sp = head.find(' ');
  if (sp == std::string::npos ||
      std::from_chars(head.data() + sp + 1, head.data() + head.size(), code).ec != std::errc()) {
    return Status::Unavailable("the collector's status line is unreadable");
  }
  int64_t length = -1;
  bool chunked = false;
  *keep = head.compare(0, 8, "HTTP/1.0") != 0;
  size_t pos = head.find("\r\n");
  while (pos != std::string::npos) {
    const size_t next = head.find("\r\n", pos + 2);
    const std::string line = head.substr(pos + 2, next == std::string::npos ? std::string::npos : next - pos - 2);
    pos = next;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string name = Lower(line.substr(0, colon));
    std::string value = Lower(line.substr(colon + 1));
    while (!value.empty() && value.front() == ' ') value.erase(0, 1);
    if (name == "content-length") {
      if (std::from_chars(value.data(), value.data() + value.size(), length).ec != std::errc() || length < 0)
        return Status::Unavailable("the collector's Content-Length is unreadable");
    } else if (name == "transfer-encoding") {
      chunked = value.find("chunked") != std::string::npos;
    } else if (name == "connection") {
      if (value.find("close") != std::string::npos) *keep = false;
      if (value.find("keep-alive") != std::string::npos) *keep = true;
    }
  }
  auto fill = [&](size_t want) -> Status {
    while (pending_.size() < want) {
      auto n = ReadSome(buf, sizeof buf, deadline);
      if (!n.ok()) return n.status();
      if (*n == 0) return Status::Unavailable("the collector closed the connection mid-answer");
      pending_.append(buf, *n);
    }
    return Status::OK();
  };
  if (chunked) {
    for (;;) {
      size_t eol;
      while ((eol = pending_.find("\r\n")) == std::string::npos) {
        if (pending_.size() > kMaxHead) return Status::Unavailable("the collector's chunk header is too long");
        auto n = ReadSome(buf, sizeof buf, deadline);
        if (!n.ok()) return n.status();
        if (*n == 0) return Status::Unavailable("the collector closed the connection mid-answer");
        pending_.append(buf, *n);
      }
      size_t size = 0;
      std::from_chars(pending_.data(), pending_.data() + eol, size, 16);
      if (size > kMaxBody) return Status::Unavailable("the collector's answer is too long");
      if (Status st = fill(eol + 2 + size + 2); !st.ok()) return st;
      pending_.erase(0, eol + 2 + size + 2);
      if (size == 0) break;  // trailers are not expected from a collector
    }
  } else if (length >= 0) {
    if (static_cast<size_t>(length) > kMaxBody) return Status::Unavailable("the collector's answer is too long");
    if (Status st = fill(static_cast<size_t>(length)); !st.ok()) return st;
    pending_.erase(0, static_cast<size_t>(length));
  } else {
    *keep = false;  // the body ends with the connection; nothing more to read for us
  }
  return code;
}

Status OtlpHttpClient::Attempt(std::string_view head, std::initializer_list<std::string_view> body, Deadline deadline) {
  if (fd_ < 0) {
    if (Status st = Connect(deadline); !st.ok()) return st;
  }
  Status st = SendAll(head, body.size() != 0, deadline);
  for (auto it = body.begin(); st.ok() && it != body.end(); ++it) st = SendAll(*it, it + 1 != body.end(), deadline);
  if (!st.ok()) {
    Close();
    return st;
  }
  bool keep = true;
  auto code = ReadAnswer(deadline, &keep);
  if (!code.ok() || !keep) Close();
  if (!code.ok()) return code.status();
  if (*code >= 200 && *code < 300) return Status::OK();
  return Status::Unavailable("the collector answered HTTP " + std::to_string(*code));
}

Status OtlpHttpClient::Post(std::string_view content_type, std::initializer_list<std::string_view> body,
                            std::chrono::milliseconds timeout) {
  const Deadline deadline = std::chrono::steady_clock::now() + timeout;
  size_t length = 0;
  for (std::string_view part : body) length += part.size();
  std::string head;
  head.reserve(256);
  head.append("POST ").append(address_.path).append(" HTTP/1.1\r\nHost: ").append(address_.host);
  head.append(":").append(std::to_string(address_.port));
  head.append("\r\nContent-Type: ").append(content_type);
  head.append("\r\nContent-Length: ").append(std::to_string(length));
  head.append("\r\nUser-Agent: inferd\r\n\r\n");
  const bool reused = fd_ >= 0;
  Status st = Attempt(head, body, deadline);
  // A kept connection the collector closed while idle fails at once: once more on a new one.
  if (!st.ok() && reused && fd_ < 0 && MillisLeft(deadline) > 0 &&
      st.message().find("answered HTTP") == std::string::npos) {
    st = Attempt(head, body, deadline);
  }
  return st;
}

}  // namespace inferd::tracing
