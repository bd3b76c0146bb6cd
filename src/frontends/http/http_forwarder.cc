#include "frontends/http/http_forwarder.h"

#include <openssl/ssl.h>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <limits>
#include <map>
#include <thread>
#include <vector>

#include "core/mutex.h"
#include "frontends/http/tls_context.h"

namespace inferd::http {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
using tcp = net::ip::tcp;
using TlsStream = ssl::stream<beast::tcp_stream>;

// Idle keep-alive connections of one kind, per peer.
template <typename Stream>
using IdlePool = std::map<std::string, std::vector<std::unique_ptr<Stream>>>;

struct HttpForwarder::Impl : std::enable_shared_from_this<HttpForwarder::Impl> {
  HttpForwarderOptions options;
  net::io_context io{1};
  net::executor_work_guard<net::io_context::executor_type> work{io.get_executor()};
  std::thread thread;
  Mutex mu;
  IdlePool<beast::tcp_stream> idle_plain TSA_GUARDED_BY(mu);
  IdlePool<TlsStream> idle_tls TSA_GUARDED_BY(mu);
  std::shared_ptr<ssl::context> tls TSA_GUARDED_BY(mu);  // null: plain

  template <typename Stream>
  IdlePool<Stream>& Idle() TSA_REQUIRES(mu) {
    if constexpr (std::is_same_v<Stream, TlsStream>) {
      return idle_tls;
    } else {
      return idle_plain;
    }
  }
  template <typename Stream>
  std::unique_ptr<Stream> TakeIdle(const std::string& address) {
    MutexLock l(&mu);
    auto& pool = Idle<Stream>();
    auto it = pool.find(address);
    if (it == pool.end() || it->second.empty()) return nullptr;
    auto s = std::move(it->second.back());
    it->second.pop_back();
    return s;
  }
  template <typename Stream>
  void GiveBack(const std::string& address, std::unique_ptr<Stream> s) {
    MutexLock l(&mu);
    auto& list = Idle<Stream>()[address];
    if (list.size() < options.max_idle_per_peer) list.push_back(std::move(s));
  }
  std::shared_ptr<ssl::context> Tls() {
    MutexLock l(&mu);
    return tls;
  }
};

namespace {

// One forwarded request on the I/O thread, over a plain or a TLS connection (`tls` set for TlsStream).
template <typename Stream>
class PeerExchange : public std::enable_shared_from_this<PeerExchange<Stream>> {
  static constexpr bool kTls = std::is_same_v<Stream, TlsStream>;

 public:
  PeerExchange(std::shared_ptr<HttpForwarder::Impl> impl, std::shared_ptr<ssl::context> tls, std::string address,
               std::shared_ptr<const WireRequest> wire, std::string from, Forwarder::Events events)
      : impl_(std::move(impl)),
        tls_(std::move(tls)),
        address_(std::move(address)),
        wire_(std::move(wire)),
        from_(std::move(from)),
        events_(std::move(events)),
        resolver_(impl_->io) {}

  void Start() {
    stream_ = impl_->TakeIdle<Stream>(address_);
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
    resolver_.async_resolve(
        host, address_.substr(colon + 1),
        [self = this->shared_from_this(), host](beast::error_code ec, tcp::resolver::results_type r) {
          if (ec) return self->Fail(Status::Unavailable("cannot resolve " + self->address_));
          if constexpr (kTls) {
            self->stream_ = std::make_unique<Stream>(self->impl_->io, *self->tls_);
          } else {
            self->stream_ = std::make_unique<Stream>(self->impl_->io);
          }
          auto& tcp_layer = beast::get_lowest_layer(*self->stream_);
          tcp_layer.expires_after(self->impl_->options.connect_timeout);
          tcp_layer.async_connect(r, [self, host](beast::error_code ec, const tcp::endpoint&) {
            if (ec) return self->Fail(Status::Unavailable("cannot connect: " + ec.message()));
            beast::get_lowest_layer(*self->stream_).socket().set_option(tcp::no_delay(true));
            if constexpr (kTls) {
              self->Handshake(host);
            } else {
              self->Send();
            }
          });
        });
  }

  // TLS: the peer's certificate must chain to the CA and name `host` (the host of the address it advertises);
  // the name is sent as SNI unless it is an IP address.
  void Handshake(const std::string& host) {
    boost::system::error_code not_ip;
    net::ip::make_address(host, not_ip);
    if (not_ip) SSL_set_tlsext_host_name(stream_->native_handle(), host.c_str());
    stream_->set_verify_callback(ssl::host_name_verification(host));
    beast::get_lowest_layer(*stream_).expires_after(impl_->options.connect_timeout);
    stream_->async_handshake(ssl::stream_base::client, [self = this->shared_from_this()](beast::error_code ec) {
      if (ec) return self->Fail(Status::Unavailable("TLS handshake with " + self->address_ + ": " + ec.message()));
      self->Send();
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
    beast::get_lowest_layer(*stream_).expires_after(impl_->options.answer_timeout);
    bhttp::async_write(*stream_, request_, [self = this->shared_from_this()](beast::error_code ec, size_t) {
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
    bhttp::async_read_some(*stream_, buffer_, *parser_,
                           [self = this->shared_from_this()](beast::error_code ec, size_t) {
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
    if (parser_->get().keep_alive() && buffer_.size() == 0) impl_->GiveBack<Stream>(address_, std::move(stream_));
    stream_.reset();
    events_.done(Status::OK());
  }

  void Fail(Status st) {
    stream_.reset();
    events_.done(std::move(st));
  }

  std::shared_ptr<HttpForwarder::Impl> impl_;
  const std::shared_ptr<ssl::context> tls_;  // TLS: what new connections are made with
  const std::string address_;
  const std::shared_ptr<const WireRequest> wire_;
  const std::string from_;
  Forwarder::Events events_;
  tcp::resolver resolver_;
  std::unique_ptr<Stream> stream_;
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
  impl_->idle_plain.clear();
  impl_->idle_tls.clear();
}

Status HttpForwarder::SetTls(const PeerTlsFiles& files) {
  auto ctx = MakePeerTlsContext(files);
  if (!ctx.ok()) return ctx.status();
  MutexLock l(&impl_->mu);
  impl_->tls = std::move(*ctx);
  return Status::OK();
}

void HttpForwarder::Forward(const std::string& address, std::shared_ptr<const WireRequest> request,
                            const std::string& from_node, Events events) {
  if (auto tls = impl_->Tls()) {
    auto call = std::make_shared<PeerExchange<TlsStream>>(impl_, std::move(tls), address, std::move(request), from_node,
                                                          std::move(events));
    return net::post(impl_->io, [call] { call->Start(); });
  }
  auto call = std::make_shared<PeerExchange<beast::tcp_stream>>(impl_, nullptr, address, std::move(request), from_node,
                                                                std::move(events));
  net::post(impl_->io, [call] { call->Start(); });
}

}  // namespace inferd::http
