#include "bench/grpc/h2_closed_loop.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace inferd::bench {
namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kDrainLimit = std::chrono::seconds(60);  // answers still awaited once the run stops
constexpr int32_t kWindow = 1 << 30;                    // receive windows: never the bottleneck
constexpr size_t kSendChunk = 64 << 10;                 // bytes gathered from nghttp2 per send()

// "host:port" -> its first address; `error` set when it does not resolve.
void Resolve(const std::string& target, sockaddr_storage* addr, socklen_t* len, std::string* error) {
  const size_t colon = target.rfind(':');
  if (colon == std::string::npos) {
    *error = "gRPC target '" + target + "' is not host:port";
    return;
  }
  std::string host = target.substr(0, colon);
  if (host.size() > 1 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (int rc = getaddrinfo(host.c_str(), target.substr(colon + 1).c_str(), &hints, &res); rc != 0 || !res) {
    *error = "cannot resolve '" + target + "': " + gai_strerror(rc);
    return;
  }
  std::memcpy(addr, res->ai_addr, res->ai_addrlen);
  *len = res->ai_addrlen;
  freeaddrinfo(res);
}

class Loop;

// A socket error as the bench reports it: a peer that closed or reset the
// connection is said so, whichever call noticed first.
std::string SocketError(const char* call, int err) {
  if (err == EPIPE || err == ECONNRESET) return "the server closed the connection";
  return std::string(call) + ": " + std::strerror(err);
}

// One request in flight on a connection.
struct Call {
  size_t slot = 0;
  const std::string* body = nullptr;  // framed: flag byte, 4-byte length, message
  size_t sent = 0;
  Clock::time_point start;
  int http_status = 0;
  int grpc_status = -1;
  std::string grpc_message;
};

// One HTTP/2 connection and its nghttp2 client session.
class Connection {
 public:
  Connection(Loop* loop, std::string authority) : loop_(loop), authority_(std::move(authority)) {}
  ~Connection() { Close(); }

  bool open() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  bool WantsWrite() const { return session_ && (out_off_ < out_.size() || nghttp2_session_want_write(session_)); }

  bool Open(const sockaddr_storage& addr, socklen_t len, std::string* error);
  void Close() {
    if (session_) nghttp2_session_del(session_);
    session_ = nullptr;
    out_.clear();
    out_off_ = 0;
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  bool Submit(size_t slot, const std::string* body, std::string* error);
  // What nghttp2 has to send, gathered into one buffer and written with as few send() calls as the socket takes
  // (as h2load does; a send per frame cost the client ~15% at c32).
  bool Flush(std::string* error) {
    for (;;) {
      if (out_off_ == out_.size()) {
        out_.clear();
        out_off_ = 0;
        while (out_.size() < kSendChunk) {
          const uint8_t* p = nullptr;
          const ssize_t n = nghttp2_session_mem_send(session_, &p);
          if (n < 0) {
            *error = std::string("HTTP/2 send: ") + nghttp2_strerror(static_cast<int>(n));
            return false;
          }
          if (n == 0) break;
          out_.append(reinterpret_cast<const char*>(p), static_cast<size_t>(n));
        }
        if (out_.empty()) return true;
      }
      const ssize_t n = ::send(fd_, out_.data() + out_off_, out_.size() - out_off_, MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return true;  // the rest when the socket takes it (POLLOUT)
        *error = SocketError("send", errno);
        return false;
      }
      out_off_ += static_cast<size_t>(n);
    }
  }
  // Reads what the socket has; false when the connection failed or closed.
  bool Read(std::string* error);
  // The calls still in flight, taken out (the connection failed).
  std::vector<Call> TakeCalls() {
    std::vector<Call> out;
    for (auto& [id, c] : calls_) out.push_back(std::move(*c));
    calls_.clear();
    return out;
  }

 private:
  static ssize_t OnReadBody(nghttp2_session*, int32_t, uint8_t* buf, size_t length, uint32_t* flags,
                            nghttp2_data_source* source, void*) {
    auto* call = static_cast<Call*>(source->ptr);
    const size_t n = std::min(length, call->body->size() - call->sent);
    std::memcpy(buf, call->body->data() + call->sent, n);
    call->sent += n;
    if (call->sent == call->body->size()) *flags |= NGHTTP2_DATA_FLAG_EOF;
    return static_cast<ssize_t>(n);
  }
  static int OnHeader(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name, size_t namelen,
                      const uint8_t* value, size_t valuelen, uint8_t, void* user);
  static int OnStreamClose(nghttp2_session*, int32_t stream_id, uint32_t error_code, void* user);

  Loop* const loop_;
  const std::string authority_;
  int fd_ = -1;
  nghttp2_session* session_ = nullptr;
  std::string out_;  // gathered frames; out_off_ of them sent
  size_t out_off_ = 0;
  // By stream; a call's address stays put while nghttp2 reads its body.
  std::unordered_map<int32_t, std::unique_ptr<Call>> calls_;
};

// The closed loop: `slots` requests kept in flight over the connections.
class Loop {
 public:
  Loop(const std::vector<PreparedRequest>& requests, int concurrency, int channels, const std::string& target,
       Clock::time_point t0, const std::atomic<bool>& stop, const SampleSink& record)
      : t0_(t0), stop_(stop), record_(record), path_(requests.front().path) {
    for (const auto& r : requests) {
      std::string framed(5, '\0');
      const uint32_t n = static_cast<uint32_t>(r.body.size());
      for (int i = 0; i < 4; ++i) framed[1 + i] = static_cast<char>((n >> (8 * (3 - i))) & 0xff);
      framed += r.body;
      bodies_.push_back(std::move(framed));
    }
    const size_t n_conns = static_cast<size_t>(std::clamp(channels, 1, std::max(1, concurrency)));
    for (size_t i = 0; i < n_conns; ++i) conns_.push_back(std::make_unique<Connection>(this, target));
    next_request_.assign(static_cast<size_t>(concurrency), 0);
    for (size_t i = 0; i < next_request_.size(); ++i) next_request_[i] = i;
    Resolve(target, &addr_, &addr_len_, &resolve_error_);
  }

  const std::string& path() const { return path_; }

  void Run() {
    for (size_t s = 0; s < next_request_.size(); ++s) Start(s);
    std::optional<Clock::time_point> drain_until;
    std::vector<pollfd> fds;
    std::vector<Connection*> polled;
    while (in_flight_ > 0) {
      if (stop_.load(std::memory_order_relaxed) && !drain_until) drain_until = Clock::now() + kDrainLimit;
      if (drain_until && Clock::now() > *drain_until) {
        for (auto& c : conns_) Fail(*c, "no answer within 60 s of the run's end");
        break;
      }
      fds.clear();
      polled.clear();
      for (auto& c : conns_) {
        if (!c->open()) continue;
        std::string error;
        if (!c->Flush(&error)) {
          Fail(*c, error);
          continue;
        }
        fds.push_back({c->fd(), static_cast<short>(POLLIN | (c->WantsWrite() ? POLLOUT : 0)), 0});
        polled.push_back(c.get());
      }
      if (fds.empty()) break;  // nothing in flight is on an open connection
      if (::poll(fds.data(), fds.size(), 1000) < 0 && errno != EINTR) break;
      for (size_t i = 0; i < fds.size(); ++i) {
        if ((fds[i].revents & (POLLIN | POLLERR | POLLHUP)) == 0) continue;
        std::string error;
        if (!polled[i]->Read(&error)) Fail(*polled[i], error);
      }
    }
  }

  // A call ended (from the session's stream-close callback, or a failed connection).
  void Done(const Call& call, bool good, const std::string& error) {
    const auto end = Clock::now();
    record_({std::chrono::duration<double>(end - t0_).count(),
             std::chrono::duration<double, std::micro>(end - call.start).count(), good},
            error);
    --in_flight_;
    if (!stop_.load(std::memory_order_relaxed)) Start(call.slot);
  }

 private:
  void Start(size_t slot) {
    ++in_flight_;
    Connection& c = *conns_[slot % conns_.size()];
    std::string error = resolve_error_;
    if (resolve_error_.empty() && (c.open() || c.Open(addr_, addr_len_, &error))) {
      const std::string* body = &bodies_[next_request_[slot]++ % bodies_.size()];
      if (c.Submit(slot, body, &error)) return;
    }
    // Could not connect or submit: an error sample, and this slot ends (no
    // busy loop of failures against a server that is gone).
    --in_flight_;
    record_({std::chrono::duration<double>(Clock::now() - t0_).count(), 0.0, false}, error);
  }

  void Fail(Connection& c, const std::string& error) {
    std::vector<Call> calls = c.TakeCalls();
    c.Close();
    for (const Call& call : calls) Done(call, false, error.empty() ? "connection failed" : error);
  }

  Clock::time_point t0_;
  const std::atomic<bool>& stop_;
  const SampleSink& record_;
  std::string path_;
  std::vector<std::string> bodies_;
  std::vector<std::unique_ptr<Connection>> conns_;
  std::vector<size_t> next_request_;
  int64_t in_flight_ = 0;
  std::string resolve_error_;  // empty: the target resolved to addr_
  sockaddr_storage addr_{};
  socklen_t addr_len_ = 0;
};

bool Connection::Open(const sockaddr_storage& addr, socklen_t len, std::string* error) {
  fd_ = ::socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0 || ::connect(fd_, reinterpret_cast<const sockaddr*>(&addr), len) != 0) {
    *error = "cannot connect to " + authority_ + ": " + std::strerror(errno);
    Close();
    return false;
  }
  const int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) | O_NONBLOCK);
  nghttp2_session_callbacks* cb = nullptr;
  nghttp2_session_callbacks_new(&cb);
  nghttp2_session_callbacks_set_on_header_callback(cb, &Connection::OnHeader);
  nghttp2_session_callbacks_set_on_stream_close_callback(cb, &Connection::OnStreamClose);
  nghttp2_session_client_new(&session_, cb, this);
  nghttp2_session_callbacks_del(cb);
  const nghttp2_settings_entry settings[] = {{NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
                                             {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, kWindow}};
  nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings, 2);
  nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, 0, kWindow);
  return true;
}

bool Connection::Submit(size_t slot, const std::string* body, std::string* error) {
  auto nv = [](const char* name, const std::string& value) {
    return nghttp2_nv{reinterpret_cast<uint8_t*>(const_cast<char*>(name)),
                      reinterpret_cast<uint8_t*>(const_cast<char*>(value.data())), std::strlen(name), value.size(),
                      NGHTTP2_NV_FLAG_NO_COPY_NAME};
  };
  static const std::string kPost = "POST", kHttp = "http", kGrpc = "application/grpc", kTrailers = "trailers";
  const std::string& path = loop_->path();
  const nghttp2_nv headers[] = {nv(":method", kPost),         nv(":scheme", kHttp),      nv(":path", path),
                                nv(":authority", authority_), nv("content-type", kGrpc), nv("te", kTrailers)};
  auto call = std::make_unique<Call>();
  call->slot = slot;
  call->body = body;
  call->start = Clock::now();
  nghttp2_data_provider provider;
  provider.source.ptr = call.get();
  provider.read_callback = &Connection::OnReadBody;
  const int32_t id = nghttp2_submit_request(session_, nullptr, headers, 6, &provider, nullptr);
  if (id < 0) {
    *error = std::string("HTTP/2 request: ") + nghttp2_strerror(id);
    return false;
  }
  calls_.emplace(id, std::move(call));
  return true;
}

bool Connection::Read(std::string* error) {
  uint8_t buf[64 * 1024];
  for (;;) {
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n == 0) {
      *error = "the server closed the connection";
      return false;
    }
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
      if (errno == EINTR) continue;
      *error = SocketError("recv", errno);
      return false;
    }
    const ssize_t used = nghttp2_session_mem_recv(session_, buf, static_cast<size_t>(n));
    if (used < 0) {
      *error = std::string("HTTP/2: ") + nghttp2_strerror(static_cast<int>(used));
      return false;
    }
  }
}

int Connection::OnHeader(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name, size_t namelen,
                         const uint8_t* value, size_t valuelen, uint8_t, void* user) {
  auto* c = static_cast<Connection*>(user);
  auto it = c->calls_.find(frame->hd.stream_id);
  if (it == c->calls_.end()) return 0;
  const std::string_view n(reinterpret_cast<const char*>(name), namelen);
  const std::string_view v(reinterpret_cast<const char*>(value), valuelen);
  if (n == ":status") it->second->http_status = std::atoi(std::string(v).c_str());
  if (n == "grpc-status") it->second->grpc_status = std::atoi(std::string(v).c_str());
  if (n == "grpc-message") it->second->grpc_message = std::string(v);
  return 0;
}

int Connection::OnStreamClose(nghttp2_session*, int32_t stream_id, uint32_t error_code, void* user) {
  auto* c = static_cast<Connection*>(user);
  auto it = c->calls_.find(stream_id);
  if (it == c->calls_.end()) return 0;
  const Call call = std::move(*it->second);
  c->calls_.erase(it);
  std::string error;
  if (error_code != 0) {
    error = "HTTP/2 stream reset (" + std::string(nghttp2_http2_strerror(error_code)) + ")";
  } else if (call.http_status != 200) {
    error = "HTTP " + std::to_string(call.http_status);
  } else if (call.grpc_status != 0) {
    error = call.grpc_status < 0 ? std::string("no grpc-status")
                                 : "gRPC " + std::to_string(call.grpc_status) + ": " + call.grpc_message;
  }
  c->loop_->Done(call, error.empty(), error);
  return 0;
}

}  // namespace

ClosedLoopDriver H2GrpcClosedLoopDriver(std::string target, int channels) {
  return [target = std::move(target), channels](const std::vector<PreparedRequest>& requests, int concurrency,
                                                Clock::time_point t0, const std::atomic<bool>& stop,
                                                const SampleSink& record) {
    if (requests.empty() || concurrency < 1) return;
    Loop(requests, concurrency, channels, target, t0, stop, record).Run();
  };
}

}  // namespace inferd::bench
