#include "frontends/http/http_server.h"

#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <array>
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cerrno>
#include <cstdio>
#include <future>
#include <optional>
#include <thread>
#include <vector>

#include "core/mutex.h"
#include "frontends/codec/compression.h"
#include "frontends/http/client_connection_cap.h"
#include "frontends/http/tls_context.h"
#include "frontends/io/run_loop.h"

namespace inferd::http {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

// A request being handled, linked into HttpServer::Impl's list (under its
// mutex) from RequestStarted to RequestFinished, so the cancel check can
// find connections whose client hung up. Owned by its Session.
struct InFlight {
  InFlight* prev = nullptr;
  InFlight* next = nullptr;
  std::chrono::steady_clock::time_point since;
  int fd = -1;  // the connection; open while linked
  bool gone = false;
  std::shared_ptr<Cancellation> cancellation;
};

struct HttpServer::Impl {
  HttpServerOptions options;
  Handler handler;
  // What a session's destructor touches, declared before the io_context: destroying the context destroys the
  // sessions its unfinished operations still hold, so these must outlive it.
  // Open connections (sessions alive).
  std::atomic<size_t> connections{0};
  // With a per-client cap: each client address's open connections.
  std::unique_ptr<ClientConnectionCap> per_client;
  net::io_context ioc;
  tcp::acceptor acceptor{ioc};
  std::vector<std::thread> threads;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  uint16_t port = 0;

  Mutex mu;
  CondVar idle_cv;
  int64_t in_flight TSA_GUARDED_BY(mu) = 0;
  bool stopped TSA_GUARDED_BY(mu) = false;

  InFlight* in_flight_head TSA_GUARDED_BY(mu) = nullptr;
  // TLS: the context new connections take (null: plain HTTP); swapped whole by ReloadTls.
  // (Not std::atomic<shared_ptr>: libstdc++ 12's lock bit is invisible to ThreadSanitizer.)
  Mutex tls_mu;
  std::shared_ptr<net::ssl::context> tls TSA_GUARDED_BY(tls_mu);
  std::shared_ptr<net::ssl::context> Tls() {
    MutexLock l(&tls_mu);
    return tls;
  }
  void SetTls(std::shared_ptr<net::ssl::context> ctx) {
    MutexLock l(&tls_mu);
    tls = std::move(ctx);
  }
  std::atomic<uint64_t> refused_connections{0};  // refused at the cap (for the log's pace)
  std::atomic<uint64_t> refused_per_client{0};
  std::optional<net::steady_timer> cancel_timer;

  void Accept();
  void RunLoop();
  void ScheduleCancelCheck();
  void CheckForHangUps();
  void RequestStarted(InFlight* r) {
    r->since = std::chrono::steady_clock::now();
    r->gone = false;
    MutexLock g(&mu);
    ++in_flight;
    r->prev = nullptr;
    r->next = in_flight_head;
    if (in_flight_head) in_flight_head->prev = r;
    in_flight_head = r;
  }
  void RequestFinished(InFlight* r) {
    {
      MutexLock g(&mu);
      --in_flight;
      if (r->prev)
        r->prev->next = r->next;
      else
        in_flight_head = r->next;
      if (r->next) r->next->prev = r->prev;
      r->prev = r->next = nullptr;
    }
    idle_cv.NotifyAll();
  }
};

namespace {

constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";

// Asio's TLS stream, not Beast's ssl_stream: Beast's flattens a write's
// buffers up to 16 KiB and, for an answer's head and a body past that, ended
// the write after the head (the body never sent).
using TlsStream = net::ssl::stream<beast::tcp_stream>;

// One connection: plain (Stream = beast::tcp_stream) or TLS (TlsStream, which
// starts with the handshake).
template <class Stream>
class Session : public std::enable_shared_from_this<Session<Stream>> {
 public:
  static constexpr bool kTls = std::is_same_v<Stream, TlsStream>;

  // `client_slot`: its place under the per-client cap, freed when it ends ("" when none). `stream_args` build
  // the stream: the socket (and for TLS, *tls).
  template <class... A>
  Session(HttpServer::Impl* server, std::shared_ptr<net::ssl::context> tls, std::string client_slot, A&&... stream_args)
      : tls_(std::move(tls)),
        stream_(std::forward<A>(stream_args)...),
        server_(server),
        client_slot_(std::move(client_slot)) {
    in_flight_.fd = Lowest().socket().native_handle();
  }
  ~Session() {
    if (!client_slot_.empty()) server_->per_client->Close(client_slot_);
    server_->connections.fetch_sub(1, std::memory_order_relaxed);
  }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  void Start() {
    net::dispatch(stream_.get_executor(), [self = this->shared_from_this()] {
      if constexpr (kTls) {
        // A client that never finishes its handshake is cut off like one that never sends a header.
        self->Lowest().expires_after(self->server_->options.handshake_timeout);
        self->stream_.async_handshake(net::ssl::stream_base::server, [self](beast::error_code ec) {
          if (ec) return self->Close();  // no accepted certificate, not TLS, too slow
          self->ReadHeader();
        });
      } else {
        self->ReadHeader();
      }
    });
  }

 private:
  beast::tcp_stream& Lowest() { return beast::get_lowest_layer(stream_); }

  void ReadHeader() {
    head_request_ = false;
    parser_.emplace();
    parser_->body_limit(server_->options.max_body_bytes);
    parser_->header_limit(static_cast<uint32_t>(server_->options.max_header_bytes));
    Lowest().expires_after(server_->options.idle_timeout);
    bhttp::async_read_header(stream_, buffer_, *parser_,
                             [self = this->shared_from_this()](beast::error_code ec, size_t) { self->OnHeader(ec); });
  }

  void OnHeader(beast::error_code ec) {
    if (ec) return OnReadError(ec);
    auto& req = parser_->get();
    if (auto cl = parser_->content_length(); cl && *cl > server_->options.max_body_bytes) {
      return SendError(413,
                       "request body of " + std::to_string(*cl) + " bytes exceeds the limit of " +
                           std::to_string(server_->options.max_body_bytes) + " bytes (--http-max-body-bytes)",
                       false);
    }
    if (beast::iequals(req[bhttp::field::expect], "100-continue")) {
      Lowest().expires_after(server_->options.write_timeout);
      net::async_write(stream_, net::buffer(kContinue.data(), kContinue.size()),
                       [self = this->shared_from_this()](beast::error_code ec2, size_t) {
                         if (ec2) return self->Close();
                         self->ReadBody();
                       });
      return;
    }
    ReadBody();
  }

  void ReadBody() {
    Lowest().expires_after(server_->options.read_timeout);
    bhttp::async_read(stream_, buffer_, *parser_,
                      [self = this->shared_from_this()](beast::error_code ec, size_t) { self->OnBody(ec); });
  }

  void OnReadError(beast::error_code ec) {
    if (ec == bhttp::error::body_limit) {
      return SendError(413,
                       "request body exceeds the limit of " + std::to_string(server_->options.max_body_bytes) +
                           " bytes (--http-max-body-bytes)",
                       false);
    }
    if (ec == bhttp::error::header_limit) return SendError(431, "request headers are too large", false);
    if (ec == bhttp::error::end_of_stream || ec == beast::error::timeout || ec == net::error::operation_aborted ||
        ec == net::error::connection_reset || ec == net::error::eof || ec == bhttp::error::partial_message) {
      return Close();
    }
    SendError(400, "malformed HTTP request: " + ec.message(), false);
  }

  void OnBody(beast::error_code ec) {
    if (ec) return OnReadError(ec);
    Lowest().expires_never();  // the handler may take as long as the model does
    auto msg = parser_->release();
    keep_alive_ = msg.keep_alive();
    version_ = msg.version();

    Request req;
    req.method = std::string(msg.method_string());
    head_request_ = msg.method() == bhttp::verb::head;
    std::string_view target(msg.target().data(), msg.target().size());
    if (auto q = target.find('?'); q != std::string_view::npos) {
      req.query = std::string(target.substr(q + 1));
      target = target.substr(0, q);
    }
    req.path = std::string(target);
    req.headers.reserve(8);
    for (const auto& f : msg) {
      std::string name(f.name_string());
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      req.headers.emplace_back(std::move(name), std::string(f.value()));
    }
    accept_encoding_ = Encoding::kIdentity;
    if (server_->options.compress_responses) {
      if (const std::string* ae = req.Header("accept-encoding")) accept_encoding_ = NegotiateEncoding(*ae);
    }
    auto body = std::make_shared<std::string>(std::move(msg.body()));
    if (const std::string* ce = req.Header("content-encoding")) {
      auto enc = ParseContentEncoding(*ce);
      if (!enc.ok()) return SendError(415, enc.status().message(), keep_alive_);
      if (*enc != Encoding::kIdentity) {
        auto plain = Decompress(*body, *enc, server_->options.max_body_bytes);
        if (!plain.ok()) {
          const int code = plain.status().code() == StatusCode::kResourceExhausted ? 413 : 400;
          return SendError(code, plain.status().message(), code != 413 && keep_alive_);
        }
        *body = std::move(*plain);
      }
    }
    req.body = std::move(body);
    // One flag serves the connection's requests in turn; it is raised only
    // when the client hung up, and then a new request gets a fresh one.
    if (!in_flight_.cancellation || in_flight_.cancellation->cancelled())
      in_flight_.cancellation = std::make_shared<Cancellation>();
    req.cancellation = in_flight_.cancellation;

    server_->RequestStarted(&in_flight_);
    req.received = in_flight_.since;
    if (server_->options.client_address) {
      beast::error_code ep_ec;
      const auto ep = Lowest().socket().remote_endpoint(ep_ec);
      if (!ep_ec) {
        const std::string ip = ep.address().to_string();
        req.client =
            ep.address().is_v6() ? "[" + ip + "]:" + std::to_string(ep.port()) : ip + ":" + std::to_string(ep.port());
      }
    }
    auto self = this->shared_from_this();
    server_->handler(std::move(req), [self](Response r) {
      net::post(self->stream_.get_executor(), [self, r = std::move(r)]() mutable { self->Deliver(std::move(r)); });
    });
  }

  // A handler's answer, on the connection's executor: whole, or a part of a
  // streamed one.
  void Deliver(Response r) {
    if (streaming_ == Streaming::kNone && !r.more) return Write(std::move(r), keep_alive_, /*counted=*/true);
    if (streaming_ == Streaming::kBroken) return;  // the client is gone; later parts are dropped
    if (streaming_ == Streaming::kNone) {
      streaming_ = Streaming::kOpen;
      // HTTP/1.0 has no chunked encoding: the body ends when the connection closes.
      chunked_ = version_ != 10;
      if (!chunked_) keep_alive_ = false;
      std::string& h = stream_pending_;
      AppendHead(&h, r);
      h.append(chunked_ ? "Transfer-Encoding: chunked\r\n" : "Connection: close\r\n");
      if (chunked_ && !keep_alive_) h.append("Connection: close\r\n");
      h.append("\r\n");
    }
    if (!r.body.empty()) {
      if (chunked_) {
        char size[20];
        const int n = std::snprintf(size, sizeof size, "%zx\r\n", r.body.size());
        stream_pending_.append(size, static_cast<size_t>(n));
      }
      stream_pending_.append(r.body);
      if (chunked_) stream_pending_.append("\r\n");
    }
    if (!r.more) {
      if (chunked_) stream_pending_.append("0\r\n\r\n");
      streaming_ = Streaming::kEnding;
    }
    FlushStream();
  }

  // Writes what the streamed answer has gathered, one write at a time; after
  // the last part, finishes the request like Write does.
  void FlushStream() {
    if (stream_writing_) return;
    if (stream_pending_.empty()) {
      if (streaming_ != Streaming::kEnding) return;
      streaming_ = Streaming::kNone;
      server_->RequestFinished(&in_flight_);
      if (!keep_alive_) return Close();
      return ReadHeader();
    }
    std::swap(stream_writing_buf_, stream_pending_);
    stream_pending_.clear();
    stream_writing_ = true;
    Lowest().expires_after(server_->options.write_timeout);
    net::async_write(stream_, net::buffer(stream_writing_buf_),
                     [self = this->shared_from_this()](beast::error_code ec, size_t) {
                       self->stream_writing_ = false;
                       self->Lowest().expires_never();  // the next part comes when the model sends it
                       if (ec) {
                         // The client hung up mid-stream: the request is told (it may stop
                         // producing), and what it still sends is dropped.
                         const bool ended = self->streaming_ == Streaming::kEnding;
                         self->streaming_ = ended ? Streaming::kNone : Streaming::kBroken;
                         self->stream_pending_.clear();
                         if (self->in_flight_.cancellation && !self->in_flight_.cancellation->cancelled()) {
                           self->in_flight_.cancellation->Cancel();
                           if (self->server_->options.on_client_gone) self->server_->options.on_client_gone();
                         }
                         self->server_->RequestFinished(&self->in_flight_);
                         return self->Close();
                       }
                       self->FlushStream();
                     });
  }

  void SendError(int status, std::string message, bool keep_alive) {
    Response r = ErrorResponse(Status::InvalidArgument(std::move(message)));
    r.status = status;
    Write(std::move(r), keep_alive, /*counted=*/false);
  }

  // Serializes the status line and headers by hand (the body is sent from
  // its own buffer, not copied): Beast's message/serializer allocates a node
  // per header field and costs more than the rest of the write path.
  void Write(Response r, bool keep_alive, bool counted) {
    out_body_ = std::move(r.body);
    if (accept_encoding_ != Encoding::kIdentity && !out_body_.empty()) {
      auto packed = Compress(out_body_, accept_encoding_);
      if (packed.ok()) {
        out_body_ = std::move(*packed);
        r.headers.emplace_back("Content-Encoding", std::string(EncodingName(accept_encoding_)));
      }
    }
    std::string& h = out_head_;
    h.clear();
    AppendHead(&h, r);
    h.append("Content-Length: ").append(std::to_string(out_body_.size())).append("\r\n");
    if (!keep_alive)
      h.append("Connection: close\r\n");
    else if (version_ == 10)
      h.append("Connection: keep-alive\r\n");
    h.append("\r\n");
    Lowest().expires_after(server_->options.write_timeout);
    // A HEAD answer states the body's length but carries none (RFC 9110 9.3.2).
    if (head_request_) out_body_.clear();
    std::array<net::const_buffer, 2> buffers{net::buffer(out_head_), net::buffer(out_body_)};
    net::async_write(stream_, buffers,
                     [self = this->shared_from_this(), keep_alive, counted](beast::error_code ec, size_t) {
                       if (counted) self->server_->RequestFinished(&self->in_flight_);
                       if (ec || !keep_alive) return self->Close();
                       self->ReadHeader();
                     });
  }

  // The status line, Server, Content-Type and the response's own headers.
  void AppendHead(std::string* h, const Response& r) const {
    h->append(version_ == 10 ? "HTTP/1.0 " : "HTTP/1.1 ");
    h->append(std::to_string(r.status)).push_back(' ');
    const auto reason = bhttp::obsolete_reason(static_cast<bhttp::status>(r.status));
    h->append(reason.data(), reason.size()).append("\r\nServer: inferd\r\n");
    if (!r.content_type.empty()) h->append("Content-Type: ").append(r.content_type).append("\r\n");
    for (const auto& [k, v] : r.headers) h->append(k).append(": ").append(v).append("\r\n");
  }

  void Close() {
    beast::error_code ec;
    // TLS: no close_notify (the answers' lengths are framed; a client reading to the end of a Connection: close
    // answer was told its length too).
    Lowest().socket().shutdown(tcp::socket::shutdown_send, ec);
    Lowest().close();
  }

  const std::shared_ptr<net::ssl::context> tls_;  // null for plain; kept while the connection lives
  Stream stream_;
  HttpServer::Impl* server_;
  const std::string client_slot_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  bool keep_alive_ = true;
  bool head_request_ = false;
  InFlight in_flight_;  // the request being handled (one at a time per session)
  unsigned version_ = 11;
  Encoding accept_encoding_ = Encoding::kIdentity;
  std::string out_head_, out_body_;  // the response being written (one at a time per session)
  // A response sent in parts (Response::more): kOpen while parts come,
  // kEnding once the last has been queued, kBroken when the client went away
  // before the last (later parts are dropped).
  enum class Streaming { kNone, kOpen, kEnding, kBroken };
  Streaming streaming_ = Streaming::kNone;
  bool chunked_ = true;
  bool stream_writing_ = false;
  std::string stream_pending_, stream_writing_buf_;
};

}  // namespace

void HttpServer::Impl::RunLoop() { io::RunWithIdleSpin(ioc, options.idle_spin); }

void HttpServer::Impl::ScheduleCancelCheck() {
  cancel_timer->expires_after(options.cancel_check);
  cancel_timer->async_wait([this](beast::error_code ec) {
    if (ec) return;
    CheckForHangUps();
    ScheduleCancelCheck();
  });
}

// A connection is only read between requests, so while its request is in
// flight the end of the stream (or a reset) waits unread in the socket: a
// peek finds it without taking bytes a pipelined next request may have sent.
void HttpServer::Impl::CheckForHangUps() {
  const auto now = std::chrono::steady_clock::now();
  // Held across the peeks on purpose: an entry's socket stays open only while
  // the entry is listed (its session unlists it before closing), so the fd
  // cannot be closed and reused under a peek. Each peek is MSG_DONTWAIT: it
  // returns at once and never waits for the network.
  MutexLock g(&mu);
  for (InFlight* r = in_flight_head; r != nullptr; r = r->next) {
    if (r->gone || now - r->since < options.cancel_check) continue;
    char c;
    const ssize_t n = ::recv(r->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      r->gone = true;
      r->cancellation->Cancel();
      if (options.on_client_gone) options.on_client_gone();
    }
  }
}

namespace {

// The peer's address as 16 bytes (IPv4 as IPv4-mapped IPv6: one client either way); "" if it is gone already.
std::string ClientKey(const tcp::socket& socket) {
  beast::error_code ec;
  const tcp::endpoint peer = socket.remote_endpoint(ec);
  if (ec) return {};
  const net::ip::address a = peer.address();
  const auto bytes =
      a.is_v4() ? net::ip::make_address_v6(net::ip::v4_mapped, a.to_v4()).to_bytes() : a.to_v6().to_bytes();
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

}  // namespace

void HttpServer::Impl::Accept() {
  // A strand serializes a session's handlers when several threads run the
  // io_context; with one thread the plain executor is already serial and
  // skips the strand's locking and type-erased executor copies.
  auto executor =
      options.threads > 1 ? net::any_io_executor(net::make_strand(ioc)) : net::any_io_executor(ioc.get_executor());
  acceptor.async_accept(executor, [this](beast::error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted || !acceptor.is_open()) return;
    if (ec) {
      spdlog::warn("accept failed: {}", ec.message());
      auto timer = std::make_shared<net::steady_timer>(ioc, std::chrono::milliseconds(10));
      timer->async_wait([this, timer](beast::error_code) { Accept(); });
      return;
    }
    // At a cap a new connection is closed at once: the open ones (and the memory and descriptors they hold)
    // stay served. Idle ones free their places within --http-idle-timeout-ms. Logged once per 1,000.
    auto refuse = [&](std::atomic<uint64_t>& refused, auto log) {
      connections.fetch_sub(1, std::memory_order_relaxed);
      if (refused.fetch_add(1, std::memory_order_relaxed) % 1000 == 0) log();
      socket.close(ec);
      Accept();
    };
    if (connections.fetch_add(1, std::memory_order_relaxed) >= options.max_connections) {
      return refuse(refused_connections, [&] {
        spdlog::warn("HTTP port {}: {} connections open, the most --http-max-connections allows: new ones are closed",
                     port, options.max_connections);
      });
    }
    std::string client;  // its place under the per-client cap, freed by its session
    if (per_client) {
      client = ClientKey(socket);
      if (client.empty() || !per_client->TryOpen(client)) {
        return refuse(refused_per_client, [&] {
          spdlog::warn(
              "HTTP port {}: a client holds the {} connections --http-max-connections-per-client allows: its new "
              "ones are closed",
              port, options.max_connections_per_client);
        });
      }
    }
    socket.set_option(tcp::no_delay(true), ec);
    if (std::shared_ptr<net::ssl::context> ctx = Tls()) {
      net::ssl::context& c = *ctx;
      std::make_shared<Session<TlsStream>>(this, std::move(ctx), std::move(client), std::move(socket), c)->Start();
    } else {
      std::make_shared<Session<beast::tcp_stream>>(this, nullptr, std::move(client), std::move(socket))->Start();
    }
    Accept();
  });
}

HttpServer::HttpServer(HttpServerOptions options, Handler handler) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
  impl_->handler = std::move(handler);
}

HttpServer::~HttpServer() { Stop(std::chrono::milliseconds(0)); }

Status HttpServer::Start() {
  if (impl_->options.tls.enabled()) {
    auto ctx = MakeServerTlsContext(impl_->options.tls);
    if (!ctx.ok()) return ctx.status();
    impl_->SetTls(std::move(*ctx));
  }
  beast::error_code ec;
  auto addr = net::ip::make_address(impl_->options.host, ec);
  if (ec) return Status::InvalidArgument("invalid --host '" + impl_->options.host + "': " + ec.message());
  tcp::endpoint ep(addr, impl_->options.port);
  auto& a = impl_->acceptor;
  a.open(ep.protocol(), ec);
  if (!ec) a.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) a.bind(ep, ec);
  if (!ec) a.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    return Status::Unavailable("cannot listen on " + impl_->options.host + ":" + std::to_string(impl_->options.port) +
                               ": " + ec.message());
  }
  impl_->port = a.local_endpoint().port();
  if (impl_->options.max_connections_per_client > 0) {
    impl_->per_client = std::make_unique<ClientConnectionCap>(impl_->options.max_connections_per_client);
  }
  impl_->work.emplace(impl_->ioc.get_executor());
  impl_->Accept();
  if (impl_->options.cancel_check.count() > 0) {
    impl_->cancel_timer.emplace(impl_->ioc);
    impl_->ScheduleCancelCheck();
  }
  for (int i = 0; i < std::max(1, impl_->options.threads); ++i) {
    impl_->threads.emplace_back([this] { impl_->RunLoop(); });
  }
  return Status::OK();
}

uint16_t HttpServer::port() const { return impl_->port; }

Status HttpServer::ReloadTls() {
  if (!impl_->options.tls.enabled()) return Status::OK();
  auto ctx = MakeServerTlsContext(impl_->options.tls);
  if (!ctx.ok()) return ctx.status();
  impl_->SetTls(std::move(*ctx));  // connections open keep the one they started with
  return Status::OK();
}

void HttpServer::StopAccepting() {
  std::promise<void> done;
  auto fut = done.get_future();
  net::post(impl_->ioc, [this, &done] {
    beast::error_code ec;
    impl_->acceptor.close(ec);
    done.set_value();
  });
  if (!impl_->threads.empty()) fut.wait();
}

void HttpServer::Stop(std::chrono::milliseconds grace) {
  {
    MutexLock g(&impl_->mu);
    if (impl_->stopped) return;
    impl_->stopped = true;
    // The grace period is real time: it bounds how long a shutdown takes.
    const auto deadline = std::chrono::steady_clock::now() + grace;
    while (impl_->in_flight > 0) {
      const auto now = std::chrono::steady_clock::now();
      if (now >= deadline) break;
      impl_->idle_cv.WaitForReal(&impl_->mu, deadline - now);
    }
  }
  impl_->work.reset();
  impl_->ioc.stop();
  for (auto& t : impl_->threads)
    if (t.joinable()) t.join();
  impl_->threads.clear();
}

}  // namespace inferd::http
