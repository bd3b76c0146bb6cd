#include "bench/open_loop_http.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "bench/http_client.h"

namespace inferd::bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr uint64_t kTimerTag = ~uint64_t{0};

struct Conn {
  int fd = -1;
  std::string in;                    // received bytes not yet framed
  const std::string* out = nullptr;  // the request being sent
  size_t sent = 0;
  size_t arrival = 0;  // which scheduled request is in flight
  bool busy = false;
  bool retried = false;  // resent once after the server closed a kept-alive connection
  bool watching_out = false;
};

class Loop {
 public:
  Loop(const OpenLoopHttpOptions& o, const std::vector<PreparedRequest>& requests, const std::vector<double>& arrivals,
       Clock::time_point t0, const SampleSink& record)
      : o_(o),
        arrivals_(arrivals),
        t0_(t0),
        record_(record),
        conns_(static_cast<size_t>(std::max(1, o.max_connections))) {
    for (const auto& r : requests) wire_.push_back(FormatRequest("POST", r.path, o.host, r.body, r.headers));
    for (size_t i = conns_.size(); i > 0; --i) closed_.push_back(i - 1);
  }
  ~Loop() {
    for (Conn& c : conns_)
      if (c.fd >= 0) ::close(c.fd);
    if (timer_ >= 0) ::close(timer_);
    if (epoll_ >= 0) ::close(epoll_);
    if (addr_) ::freeaddrinfo(addr_);
  }

  void Run(const std::atomic<bool>& stop) {
    if (!Setup()) {
      // Nothing can be sent: every request fails with the reason.
      for (size_t i = 0; i < arrivals_.size() && !stop.load(std::memory_order_relaxed); ++i) {
        std::this_thread::sleep_until(Due(i));  // the schedule, as the requests would have gone
        record_({Seconds(Clock::now()), 0, false}, setup_error_);
      }
      return;
    }
    epoll_event events[64];
    while (!stop.load(std::memory_order_relaxed)) {
      StartDue();
      if (next_ >= arrivals_.size() && in_flight_ == 0) break;
      ArmTimer();
      const int n = ::epoll_wait(epoll_, events, 64, 50);  // 50 ms: a stop is seen within that
      for (int i = 0; i < n; ++i) {
        if (events[i].data.u64 == kTimerTag) {
          uint64_t expirations;
          [[maybe_unused]] ssize_t r = ::read(timer_, &expirations, sizeof expirations);
          armed_ = Clock::time_point::max();
          continue;
        }
        Conn& c = conns_[events[i].data.u64];
        if (c.fd < 0) continue;  // closed earlier in this batch of events
        if (events[i].events & EPOLLOUT) Send(c);
        if (c.fd >= 0 && (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))) Receive(c);
      }
    }
  }

 private:
  double Seconds(Clock::time_point t) const { return std::chrono::duration<double>(t - t0_).count(); }
  Clock::time_point Due(size_t i) const {
    return t0_ + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(arrivals_[i]));
  }

  bool Setup() {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    const std::string port = std::to_string(o_.port);
    if (int rc = ::getaddrinfo(o_.host.c_str(), port.c_str(), &hints, &addr_); rc != 0) {
      addr_ = nullptr;
      setup_error_ = "cannot resolve " + o_.host + ": " + gai_strerror(rc);
      return false;
    }
    epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
    timer_ = ::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (epoll_ < 0 || timer_ < 0) {
      setup_error_ = std::string("epoll/timerfd: ") + std::strerror(errno);
      return false;
    }
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kTimerTag;
    ::epoll_ctl(epoll_, EPOLL_CTL_ADD, timer_, &ev);
    return true;
  }

  // Opens a connection in slot `i`; false (and why in *error) when it cannot.
  bool Open(size_t i, std::string* error) {
    Conn& c = conns_[i];
    for (addrinfo* a = addr_; a; a = a->ai_next) {
      int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) continue;
      if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {  // blocking: local connects take microseconds
        int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
        epoll_event ev{};
        ev.events = EPOLLIN;
        ev.data.u64 = i;
        ::epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &ev);
        c.fd = fd;
        c.in.clear();
        c.watching_out = false;
        return true;
      }
      ::close(fd);
    }
    *error = "cannot connect to " + o_.host + ":" + std::to_string(o_.port) + ": " + std::strerror(errno);
    return false;
  }

  size_t Slot(const Conn& c) const { return static_cast<size_t>(&c - conns_.data()); }

  // Closes the connection; the slot stays with the caller.
  void Drop(Conn& c) {
    ::epoll_ctl(epoll_, EPOLL_CTL_DEL, c.fd, nullptr);
    ::close(c.fd);
    c.fd = -1;
    c.in.clear();
  }
  // Closes the connection and frees its slot.
  void Close(Conn& c) {
    Drop(c);
    closed_.push_back(Slot(c));
  }

  // Sends every request whose time has come, while connections are free.
  void StartDue() {
    const Clock::time_point now = Clock::now();
    while (next_ < arrivals_.size() && Due(next_) <= now) {
      size_t slot;
      if (!idle_.empty()) {
        slot = idle_.back();
        idle_.pop_back();
      } else if (!closed_.empty()) {
        slot = closed_.back();
        closed_.pop_back();
        std::string error;
        if (!Open(slot, &error)) {
          closed_.push_back(slot);
          record_({Seconds(Clock::now()), std::chrono::duration<double, std::micro>(Clock::now() - Due(next_)).count(),
                   false},
                  error);
          ++next_;
          continue;
        }
      } else {
        return;  // every connection is busy: the request waits, and its wait counts
      }
      Conn& c = conns_[slot];
      c.arrival = next_;
      c.out = &wire_[next_ % wire_.size()];
      c.sent = 0;
      c.busy = true;
      c.retried = false;
      ++in_flight_;
      ++next_;
      Send(c);
    }
  }

  // The timer fires when the next request is due; not armed while it is
  // already due (it waits for a connection to come free).
  void ArmTimer() {
    if (next_ >= arrivals_.size()) return;
    const Clock::time_point due = Due(next_);
    if (due == armed_ || due <= Clock::now()) return;
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(due.time_since_epoch()).count();
    itimerspec spec{};
    spec.it_value.tv_sec = static_cast<time_t>(ns / 1000000000);
    spec.it_value.tv_nsec = static_cast<long>(ns % 1000000000);
    ::timerfd_settime(timer_, TFD_TIMER_ABSTIME, &spec, nullptr);
    armed_ = due;
  }

  void WatchOut(Conn& c, bool on) {
    if (c.watching_out == on) return;
    epoll_event ev{};
    ev.events = on ? (EPOLLIN | EPOLLOUT) : EPOLLIN;
    ev.data.u64 = Slot(c);
    ::epoll_ctl(epoll_, EPOLL_CTL_MOD, c.fd, &ev);
    c.watching_out = on;
  }

  void Send(Conn& c) {
    if (!c.busy) return;
    while (c.sent < c.out->size()) {
      const ssize_t n = ::send(c.fd, c.out->data() + c.sent, c.out->size() - c.sent, MSG_NOSIGNAL);
      if (n > 0) {
        c.sent += static_cast<size_t>(n);
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        WatchOut(c, true);
        return;
      } else {
        Broken(c, std::string("send failed: ") + std::strerror(errno));
        return;
      }
    }
    WatchOut(c, false);
  }

  void Receive(Conn& c) {
    char tmp[65536];
    bool ended = false;  // end of stream, or a receive error (why in `error`)
    std::string error = "connection closed by the server";
    while (true) {
      const ssize_t n = ::recv(c.fd, tmp, sizeof tmp, 0);
      if (n > 0) {
        c.in.append(tmp, static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      if (n < 0) error = std::string("recv failed: ") + std::strerror(errno);
      ended = true;
      break;
    }
    if (c.busy && !c.in.empty()) {
      // An answer that came whole counts even when the server closed right after it.
      auto frame = FrameResponse(c.in);
      if (!frame.ok()) {
        Finish(c, false, frame.status().ToString());
        Close(c);
        return;
      }
      if (frame->has_value()) {
        const ResponseFrame& f = **frame;
        const bool ok = f.head.status == 200;
        Finish(c, ok,
               ok ? std::string()
                  : "HTTP " + std::to_string(f.head.status) + ": " +
                        c.in.substr(f.body_start, std::min<size_t>(300, f.length - f.body_start)));
        auto conn = f.head.headers.find("connection");
        const bool close = ended || (conn != f.head.headers.end() && conn->second == "close");
        c.in.erase(0, f.length);
        if (close) {
          Close(c);
        } else {
          idle_.push_back(Slot(c));
        }
        return;
      }
    }
    if (ended) {
      if (c.busy) {
        Broken(c, error);
      } else {
        RemoveIdle(c);
        Close(c);
      }
      return;
    }
    if (!c.busy) c.in.clear();  // nothing was asked: ignore it
  }

  // A busy connection failed: the server may have closed it while idle, so a
  // request that got no byte back is resent once on a new connection.
  void Broken(Conn& c, const std::string& error) {
    const size_t slot = Slot(c);
    const bool retry = !c.retried && c.in.empty();
    Drop(c);  // the slot is reused at once, or freed below
    std::string open_error;
    if (retry && Open(slot, &open_error)) {
      c.retried = true;
      c.sent = 0;
      Send(c);
      return;
    }
    closed_.push_back(slot);
    Finish(c, false, retry ? open_error : error);
  }

  void Finish(Conn& c, bool ok, const std::string& error) {
    const Clock::time_point end = Clock::now();
    record_({Seconds(end), std::chrono::duration<double, std::micro>(end - Due(c.arrival)).count(), ok}, error);
    c.busy = false;
    --in_flight_;
  }

  void RemoveIdle(const Conn& c) {
    const size_t slot = Slot(c);
    for (size_t i = 0; i < idle_.size(); ++i) {
      if (idle_[i] == slot) {
        idle_[i] = idle_.back();
        idle_.pop_back();
        return;
      }
    }
  }

  const OpenLoopHttpOptions& o_;
  const std::vector<double>& arrivals_;
  const Clock::time_point t0_;
  const SampleSink& record_;
  std::vector<std::string> wire_;
  std::vector<Conn> conns_;
  std::vector<size_t> idle_;    // open, not busy
  std::vector<size_t> closed_;  // slots without a connection
  size_t next_ = 0;             // the next arrival to send
  size_t in_flight_ = 0;
  Clock::time_point armed_ = Clock::time_point::max();
  addrinfo* addr_ = nullptr;
  int epoll_ = -1;
  int timer_ = -1;
  std::string setup_error_;
};

}  // namespace

void RunOpenLoopHttp(const OpenLoopHttpOptions& options, const std::vector<PreparedRequest>& requests,
                     const std::vector<double>& arrivals, Clock::time_point t0, const std::atomic<bool>& stop,
                     const SampleSink& record) {
  if (requests.empty()) return;
  Loop(options, requests, arrivals, t0, record).Run(stop);
}

}  // namespace inferd::bench
