#include "frontends/http/http_forwarder.h"

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <limits>
#include <map>
#include <thread>
#include <vector>

#include "core/mutex.h"

namespace inferd::http {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

struct HttpForwarder::Impl : std::enable_shared_from_this<HttpForwarder::Impl> {
  HttpForwarderOptions options;
  net::io_context io{1};
  net::executor_work_guard<net::io_context::executor_type> work{io.get_executor()};
  std::thread thread;
  Mutex mu;
  std::map<std::string, std::vector<std::unique_ptr<beast::tcp_stream>>> idle TSA_GUARDED_BY(mu);

  std::unique_ptr<beast::tcp_stream> TakeIdle(const std::string& address) {
    MutexLock l(&mu);
    auto it = idle.find(address);
    if (it == idle.end() || it->second.empty()) return nullptr;
    auto s = std::move(it->second.back());
    it->second.pop_back();
    return s;
  }
  void GiveBack(const std::string& address, std::unique_ptr<beast::tcp_stream> s) {
    MutexLock l(&mu);
    auto& list = idle[address];
    if (list.size() < options.max_idle_per_peer) list.push_back(std::move(s));
  }
};

namespace {

// One forwarded request on the I/O thread.
class PeerExchange : public std::enable_shared_from_this<PeerExchange> {
 public:
  PeerExchange(std::shared_ptr<HttpForwarder::Impl> impl, std::string address, std::shared_ptr<const WireRequest> wire,
               std::string from, Forwarder::Events events)
      : impl_(std::move(impl)),
        address_(std::move(address)),
        wire_(std::move(wire)),
        from_(std::move(from)),
        events_(std::move(events)),
        resolver_(impl_->io) {}

  void Start() {
    stream_ = impl_->TakeIdle(address_);
    if (stream_) {
      reused_ = true;
      return Send();
    }
    Connect();
  }

 private:
  void Connect() {
    reused_ = false;
    const size_t colon = address_.rfind(':');
    if (colon == std::string::npos) return Fail(Status::InvalidArgument("peer address '" + address_ + "'"));
    std::string host = address_.substr(0, colon);
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    resolver_.async_resolve(host, address_.substr(colon + 1),
                            [self = shared_from_this()](beast::error_code ec, tcp::resolver::results_type r) {
                              if (ec) return self->Fail(Status::Unavailable("cannot resolve " + self->address_));
                              self->stream_ = std::make_unique<beast::tcp_stream>(self->impl_->io);
                              self->stream_->expires_after(self->impl_->options.connect_timeout);
                              self->stream_->async_connect(r, [self](beast::error_code ec, const tcp::endpoint&) {
                                if (ec) return self->Fail(Status::Unavailable("cannot connect: " + ec.message()));
                                self->stream_->socket().set_option(tcp::no_delay(true));
                                self->Send();
                              });
                            });
  }

  void Send() {
    request_ = {};
    request_.method_string(wire_->method);
    request_.target(wire_->target);
    request_.version(11);
    for (const auto& [name, value] : wire_->headers) request_.insert(name, value);
    request_.set(bhttp::field::host, address_);
    request_.set(kForwardedByHeader, from_);
    if (wire_->body) request_.body() = *wire_->body;
    request_.keep_alive(true);
    request_.prepare_payload();
    stream_->expires_after(impl_->options.answer_timeout);
    bhttp::async_write(*stream_, request_, [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec) return self->Dropped(ec);
      self->parser_.emplace();
      self->parser_->body_limit(std::numeric_limits<std::uint64_t>::max());
      bhttp::async_read_header(*self->stream_, self->buffer_, *self->parser_, [self](beast::error_code ec, size_t) {
        if (ec) return self->Dropped(ec);
        self->OnHeader();
      });
    });
  }

  // The connection failed before the answer began: a pooled one the peer had closed is retried on a new
  // connection once; otherwise the peer failed.
  void Dropped(beast::error_code ec) {
    stream_.reset();
    if (reused_) return Connect();
    Fail(Status::Unavailable("the connection failed before an answer: " + ec.message()));
  }

  void OnHeader() {
    const auto& msg = parser_->get();
    std::vector<std::pair<std::string, std::string>> headers;
    for (const auto& f : msg) headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
    const bool streamed = parser_->chunked();
    events_.head(static_cast<int>(msg.result_int()), std::move(headers), streamed);
    ReadBody();
  }

  void ReadBody() {
    if (parser_->is_done()) return Finish();
    piece_.resize(64 * 1024);
    parser_->get().body().data = piece_.data();
    parser_->get().body().size = piece_.size();
    bhttp::async_read_some(*stream_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec == bhttp::error::need_buffer) ec = {};
      const size_t got = self->piece_.size() - self->parser_->get().body().size;
      if (ec) {
        self->stream_.reset();
        return self->events_.done(Status::Unavailable("the answer broke off: " + ec.message()));
      }
      if (got > 0 && !self->events_.body(std::string(self->piece_.data(), got))) {
        self->stream_.reset();  // the client is gone: stop reading, drop the connection
        return self->events_.done(Status::Cancelled("the client went away"));
      }
      self->ReadBody();
    });
  }

  void Finish() {
    if (parser_->get().keep_alive() && buffer_.size() == 0) impl_->GiveBack(address_, std::move(stream_));
    stream_.reset();
    events_.done(Status::OK());
  }

  void Fail(Status st) {
    stream_.reset();
    events_.done(std::move(st));
  }

  std::shared_ptr<HttpForwarder::Impl> impl_;
  const std::string address_;
  const std::shared_ptr<const WireRequest> wire_;
  const std::string from_;
  Forwarder::Events events_;
  tcp::resolver resolver_;
  std::unique_ptr<beast::tcp_stream> stream_;
  bool reused_ = false;
  bhttp::request<bhttp::string_body> request_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::response_parser<bhttp::buffer_body>> parser_;
  std::vector<char> piece_;
};

}  // namespace

HttpForwarder::HttpForwarder(HttpForwarderOptions options) : impl_(std::make_shared<Impl>()) {
  impl_->options = options;
  impl_->thread = std::thread([impl = impl_.get()] { impl->io.run(); });
}

HttpForwarder::~HttpForwarder() { Stop(); }

void HttpForwarder::Stop() {
  if (!impl_->thread.joinable()) return;
  impl_->work.reset();  // calls in flight finish (a dead peer within connect_timeout); then the thread ends
  impl_->thread.join();
  MutexLock l(&impl_->mu);
  impl_->idle.clear();
}

void HttpForwarder::Forward(const std::string& address, std::shared_ptr<const WireRequest> request,
                            const std::string& from_node, Events events) {
  auto call = std::make_shared<PeerExchange>(impl_, address, std::move(request), from_node, std::move(events));
  net::post(impl_->io, [call] { call->Start(); });
}

}  // namespace inferd::http
