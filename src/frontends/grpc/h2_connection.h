// The gRPC port's connections and the state they share with the port and its
// calls: H2Call::Out (an answer's state), H2Port::Impl (the listener, its
// I/O threads and counters) and H2Connection (one client connection: nghttp2's
// session, socket reads and gathered writes, keepalive pings and the ping
// policy, per-stream deadlines, compression and size limits, the hand-off of
// calls to their handlers). Private to the port: included by h2_port.cc only
// (its helpers sit in an unnamed namespace for that one translation unit).
//
// Thread-safety: a connection's members are used on its I/O thread; what
// other threads touch is said where it is declared.
#pragma once

#include <nghttp2/nghttp2.h>
#include <spdlog/spdlog.h>

#include <array>
#include <atomic>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <deque>
#include <optional>
#include <thread>
#include <unordered_map>

#include "core/mutex.h"
#include "frontends/codec/compression.h"
#include "frontends/codec/json_tensor.h"
#include "frontends/grpc/h2_port.h"
#include "frontends/io/run_loop.h"

namespace inferd::grpcfe {

namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

constexpr int kUnimplemented = 12, kInternal = 13, kResourceExhausted = 8;
constexpr int32_t kStreamWindow = 4 << 20;       // per call: a 4 MiB message arrives in one round trip
constexpr int32_t kConnectionWindow = 64 << 20;  // all calls of a connection
constexpr size_t kWriteChunk = 256 << 10;        // bytes gathered from nghttp2 per socket write

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

nghttp2_nv Header(std::string_view name, std::string_view value) {
  return {reinterpret_cast<uint8_t*>(const_cast<char*>(name.data())),
          reinterpret_cast<uint8_t*>(const_cast<char*>(value.data())), name.size(), value.size(), NGHTTP2_NV_FLAG_NONE};
}

// Unpadded base64 (gRPC allows it in -bin values) padded for the decoder.
Result<std::string> DecodeBinaryHeader(std::string_view v) {
  std::string padded(v);
  while (padded.size() % 4 != 0) padded.push_back('=');
  return json::Base64Decode(padded);
}

std::string Endpoint(const tcp::socket& s) {
  boost::system::error_code ec;
  const auto ep = s.remote_endpoint(ec);
  if (ec) return "?";
  const auto a = ep.address();
  return (a.is_v6() ? "[" + a.to_string() + "]" : a.to_string()) + ":" + std::to_string(ep.port());
}

}  // namespace
// The answer's state and the received bytes, on the connection's thread.
struct H2Call::Out {
  std::shared_ptr<H2Handler> handler;
  bool manual_flow = false;
  bool counted = false;       // an open call of the port (handed to a handler, not yet fully answered)
  bool headers_sent = false;  // the response's HEADERS submitted
  bool finished = false;      // Finish called
  bool deferred = false;      // the data provider waits for more
  bool closed = false;        // the stream is gone
  bool half_closed = false;   // the client sent END_STREAM
  MetadataList initial;
  MetadataList trailers;
  std::string data;  // framed messages not yet handed to nghttp2
  size_t data_pos = 0;
  std::string in;                 // received bytes not yet a whole message
  std::deque<size_t> unconsumed;  // wire bytes of messages handed to a manual-flow handler
  std::optional<net::steady_timer> timer;
};

struct H2Port::Impl {
  H2PortOptions options;
  H2Dispatch dispatch;
  std::vector<std::unique_ptr<net::io_context>> iocs;
  std::vector<net::executor_work_guard<net::io_context::executor_type>> work;
  std::vector<std::thread> threads;
  std::optional<tcp::acceptor> acceptor;
  size_t next_ioc = 0;  // on the acceptor's thread
  uint16_t port = 0;
  std::atomic<bool> draining{false};
  std::atomic<uint64_t> ping_strikeouts{0};
  std::atomic<uint64_t> keepalive_timeouts{0};

  Mutex mu;
  CondVar calls_cv;
  int64_t open_calls TSA_GUARDED_BY(mu) = 0;
  int64_t open_connections TSA_GUARDED_BY(mu) = 0;  // accepted, not yet closed
  std::unordered_map<H2Connection*, std::weak_ptr<H2Connection>> connections TSA_GUARDED_BY(mu);

  nghttp2_session_callbacks* callbacks = nullptr;
  nghttp2_option* session_options = nullptr;

  void Accept();
  void CallOpened() {
    MutexLock g(&mu);
    ++open_calls;
  }
  void CallAnswered() {
    bool none;
    {
      MutexLock g(&mu);
      none = --open_calls == 0;
    }
    if (none) calls_cv.NotifyAll();
  }
  void ConnectionClosed() {
    bool none;
    {
      MutexLock g(&mu);
      none = --open_connections == 0;
    }
    if (none) calls_cv.NotifyAll();
  }
  std::vector<std::shared_ptr<H2Connection>> Connections() {
    std::vector<std::shared_ptr<H2Connection>> out;
    MutexLock g(&mu);
    for (auto& [p, weak] : connections)
      if (auto c = weak.lock()) out.push_back(std::move(c));
    return out;
  }
};

// One client connection: an nghttp2 server session on one I/O thread.
struct H2Connection : std::enable_shared_from_this<H2Connection> {
  H2Connection(H2Port::Impl* port, net::io_context& ioc, tcp::socket socket)
      : port(port), ioc(ioc), socket(std::move(socket)) {}
  ~H2Connection() {
    if (session) nghttp2_session_del(session);
    MutexLock g(&port->mu);
    port->connections.erase(this);
  }

  H2Port::Impl* const port;
  net::io_context& ioc;
  tcp::socket socket;
  nghttp2_session* session = nullptr;
  std::string peer;
  std::string wbuf;
  bool writing = false;
  bool closed = false;
  bool in_recv = false;           // inside nghttp2_session_mem_recv: its callbacks may submit, not send
  std::string* memory = nullptr;  // H2Port::ServeBytes: no socket; what would be written is appended here
  bool counted = false;           // in the port's open_connections until closed
  bool closing = false;           // the port stops: close once what is queued is written
  bool sent_fin = false;          // ShutSend: our side is shut, waiting for the client's end
  const char* fin_reason = "";
  // Keepalive and the client's ping policy (H2PortOptions).
  std::optional<net::steady_timer> keepalive;
  bool awaiting_ping_ack = false;
  int pings_without_data = 0;
  int ping_strikes = 0;
  std::chrono::steady_clock::time_point last_client_ping{};
  std::unordered_map<int32_t, std::shared_ptr<H2Call>> calls;

  void Start() {
    boost::system::error_code ec;
    socket.set_option(tcp::no_delay(true), ec);
    socket.non_blocking(true, ec);
    peer = Endpoint(socket);
    StartSession();
    Flush();
    Read();
    ScheduleKeepalive(port->options.keepalive_time);
  }

  void ScheduleKeepalive(std::chrono::milliseconds after) {
    if (after.count() <= 0) return;
    if (!keepalive) keepalive.emplace(ioc);
    keepalive->expires_after(after);
    keepalive->async_wait([weak = weak_from_this()](boost::system::error_code ec) {
      auto self = weak.lock();
      if (ec || !self || self->closed) return;
      self->KeepaliveTick();
    });
  }

  void KeepaliveTick() {
    const H2PortOptions& o = port->options;
    if (awaiting_ping_ack) {  // the ping sent keepalive_timeout ago is unanswered
      port->keepalive_timeouts.fetch_add(1, std::memory_order_relaxed);
      spdlog::info("gRPC port: closing the connection from {}: no answer to a keepalive ping", peer);
      return Close("keepalive ping unanswered");
    }
    const bool may = (!calls.empty() || o.keepalive_permit_without_calls) &&
                     (o.max_pings_without_data <= 0 || pings_without_data < o.max_pings_without_data);
    if (!may) return ScheduleKeepalive(o.keepalive_time);
    nghttp2_submit_ping(session, NGHTTP2_FLAG_NONE, nullptr);
    ++pings_without_data;
    awaiting_ping_ack = true;
    Flush();
    ScheduleKeepalive(o.keepalive_timeout);
  }

  // A client's PING (not an ACK): too many too close together end the connection (gRPC's ping policy).
  void ClientPing() {
    const H2PortOptions& o = port->options;
    const auto now = std::chrono::steady_clock::now();
    const auto min_interval = calls.empty() && !o.keepalive_permit_without_calls
                                  ? std::chrono::milliseconds(std::chrono::hours(2))
                                  : o.min_recv_ping_interval;
    if (last_client_ping != std::chrono::steady_clock::time_point{} && now - last_client_ping < min_interval &&
        ++ping_strikes > o.max_ping_strikes) {
      port->ping_strikeouts.fetch_add(1, std::memory_order_relaxed);
      spdlog::info("gRPC port: closing the connection from {}: too many pings", peer);
      static constexpr char kWhy[] = "too_many_pings";
      nghttp2_submit_goaway(session, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(session),
                            NGHTTP2_ENHANCE_YOUR_CALM, reinterpret_cast<const uint8_t*>(kWhy), sizeof(kWhy) - 1);
      nghttp2_session_terminate_session(session, NGHTTP2_ENHANCE_YOUR_CALM);
    }
    last_client_ping = now;
  }

  void StartSession() {
    nghttp2_session_server_new2(&session, port->callbacks, this, port->session_options);
    std::vector<nghttp2_settings_entry> settings = {
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, static_cast<uint32_t>(kStreamWindow)},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, static_cast<uint32_t>(port->options.max_header_bytes)}};
    if (port->options.max_concurrent_streams > 0) {
      settings.push_back(
          {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, static_cast<uint32_t>(port->options.max_concurrent_streams)});
    }
    nghttp2_submit_settings(session, NGHTTP2_FLAG_NONE, settings.data(), settings.size());
    nghttp2_session_set_local_window_size(session, NGHTTP2_FLAG_NONE, 0, kConnectionWindow);
    if (port->draining.load()) GoAway();
  }

  // Waits until the socket is readable, then reads into the I/O thread's buffer: an idle connection holds no
  // read buffer of its own (10,000 of them would otherwise hold 640 MiB).
  void Read() {
    socket.async_wait(tcp::socket::wait_read, [self = shared_from_this()](boost::system::error_code ec) {
      if (self->closed) return;
      if (ec) return self->Close("wait: " + ec.message());
      thread_local std::array<uint8_t, 64 << 10> buf;
      for (;;) {
        const size_t n = self->socket.read_some(net::buffer(buf), ec);
        if (ec == net::error::would_block || ec == net::error::try_again) break;
        if (ec) return self->Close(self->sent_fin ? self->fin_reason : "read: " + ec.message());  // the end too
        if (self->sent_fin) continue;  // after our FIN: read to the client's end, discarding (ShutSend)
        self->in_recv = true;
        const ssize_t rv = nghttp2_session_mem_recv(self->session, buf.data(), n);
        self->in_recv = false;
        if (rv < 0) {
          self->Flush();  // nghttp2's GOAWAY, when it queued one
          return self->Close(std::string("HTTP/2: ") + nghttp2_strerror(static_cast<int>(rv)));
        }
        if (n < buf.size() || self->closed) break;  // drained (a full buffer: read again)
      }
      self->Flush();
      if (!self->closed) self->Read();
    });
  }

  void Flush() {
    if (writing || closed || in_recv || sent_fin) return;
    while (wbuf.size() < kWriteChunk) {
      const uint8_t* p = nullptr;
      const ssize_t n = nghttp2_session_mem_send(session, &p);
      if (n < 0) return Close(std::string("HTTP/2 send: ") + nghttp2_strerror(static_cast<int>(n)));
      if (n == 0) break;
      wbuf.append(reinterpret_cast<const char*>(p), static_cast<size_t>(n));
    }
    if (wbuf.empty()) {
      if (!nghttp2_session_want_read(session) && !nghttp2_session_want_write(session)) ShutSend("done (GOAWAY)");
      return;
    }
    if (memory) {
      if (memory->size() < (1u << 20)) memory->append(wbuf, 0, (1u << 20) - memory->size());
      wbuf.clear();
      return Flush();
    }
    writing = true;
    net::async_write(socket, net::buffer(wbuf), [self = shared_from_this()](boost::system::error_code ec, size_t) {
      self->writing = false;
      self->wbuf.clear();
      if (self->wbuf.capacity() > kWriteChunk) std::string().swap(self->wbuf);  // an idle connection keeps little
      if (ec) return self->Close("write: " + ec.message());
      self->Flush();
      if (self->closing && !self->writing) self->ShutSend("the port stops");
    });
  }

  void GoAway() {
    nghttp2_submit_goaway(session, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(session),
                          NGHTTP2_NO_ERROR, nullptr, 0);
  }

  // Every open call is cancelled; the socket closes. The session is deleted with this.
  // What nghttp2 still has (the last answers' trailers) is written, then the connection closes.
  void CloseWhenWritten() {
    closing = true;
    Flush();
    if (!writing) ShutSend("the port stops");
  }

  // Ends a connection whose last frames are written: our side is shut (FIN), then the client's bytes are read and
  // dropped until it closes too. Closing at once could reset the connection (the kernel answers unread input
  // with RST), and an RST makes the client's kernel drop what it had not yet read: the last answer's trailers.
  // A client that never closes is cut off when the port stops.
  void ShutSend(const char* why) {
    if (closed || sent_fin) return;
    sent_fin = true;
    fin_reason = why;
    boost::system::error_code ec;
    socket.shutdown(tcp::socket::shutdown_send, ec);
    if (ec || memory) Close(why);
  }

  void Close(const std::string& why) {
    if (closed) return;
    closed = true;
    if (counted) port->ConnectionClosed();
    spdlog::debug("gRPC port: the connection from {} closes: {}", peer, why);
    keepalive.reset();
    auto open = std::move(calls);
    calls.clear();
    for (auto& [id, call] : open) StreamGone(*call);
    boost::system::error_code ec;
    socket.shutdown(tcp::socket::shutdown_both, ec);
    socket.close(ec);
  }

  // The stream ended: an unfinished call is cancelled. The handler is let go (it may hold the call).
  void StreamGone(H2Call& call) {
    H2Call::Out& o = *call.out_;
    if (o.closed) return;
    o.closed = true;
    o.timer.reset();  // here, on the connection's thread, while its I/O context lives
    std::shared_ptr<H2Handler> handler = std::move(o.handler);
    if (handler && !o.finished) handler->OnCancel();
    if (o.counted) {
      o.counted = false;
      port->CallAnswered();
    }
  }

  H2Call* CallOf(int32_t id) { return static_cast<H2Call*>(nghttp2_session_get_stream_user_data(session, id)); }

  // The request's headers are in: checked, then handed to its handler.
  void Begin(const std::shared_ptr<H2Call>& call) {
    H2Call::Out& o = *call->out_;
    if (port->draining.load()) {
      nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, call->id_, NGHTTP2_REFUSED_STREAM);
      return;
    }
    if (call->method_ != "POST") return HttpError(*call, "405");
    if (call->content_type_.compare(0, 16, "application/grpc") != 0) return HttpError(*call, "415");
    if (call->bad_header_) return FinishNow(*call, kInternal, "a -bin metadata value is not base64");
    const std::string& enc = call->encoding_;
    if (!enc.empty() && enc != "identity" && enc != "gzip" && enc != "deflate")
      return FinishNow(*call, kUnimplemented, "grpc-encoding '" + enc + "' is not supported (gzip, deflate)");
    std::shared_ptr<H2Handler> handler = port->dispatch(call);
    if (!handler) return FinishNow(*call, kUnimplemented, "unknown method " + call->path_);
    o.handler = std::move(handler);
    o.manual_flow = o.handler->ManualFlowControl();
    o.counted = true;
    port->CallOpened();
    if (call->deadline_ != std::chrono::system_clock::time_point::max()) {
      o.timer.emplace(ioc);
      o.timer->expires_after(call->deadline_ - std::chrono::system_clock::now());
      o.timer->async_wait([weak = std::weak_ptr<H2Call>(call)](boost::system::error_code ec) {
        if (ec) return;
        auto c = weak.lock();
        if (!c || c->out_->closed || c->out_->finished || !c->out_->handler) return;
        std::shared_ptr<H2Handler> handler = c->out_->handler;  // held: the call may end inside
        handler->OnDeadline();
      });
    }
  }

  void HttpError(H2Call& call, std::string_view status) {
    call.out_->finished = true;
    const nghttp2_nv nv[] = {Header(":status", status)};
    nghttp2_submit_response(session, call.id_, nv, 1, nullptr);
  }

  void FinishNow(H2Call& call, int code, const std::string& message) { DoFinish(call, code, message, {}); }

  void OnData(H2Call& call, const uint8_t* data, size_t len) {
    H2Call::Out& o = *call.out_;
    if (o.closed || o.finished || !o.handler) {
      nghttp2_session_consume(session, call.id_, len);
      return;
    }
    if (!o.manual_flow) nghttp2_session_consume(session, call.id_, len);
    o.in.append(reinterpret_cast<const char*>(data), len);
    size_t pos = 0;
    while (o.in.size() - pos >= 5 && !o.finished && !o.closed) {
      const auto* p = reinterpret_cast<const uint8_t*>(o.in.data() + pos);
      const uint8_t flag = p[0];
      const size_t n = (size_t{p[1]} << 24) | (size_t{p[2]} << 16) | (size_t{p[3]} << 8) | size_t{p[4]};
      if (n > port->options.max_message_bytes) {
        return Refuse(call, kResourceExhausted,
                      "received message larger than max (" + std::to_string(n) + " vs. " +
                          std::to_string(port->options.max_message_bytes) + "; --grpc-max-message-bytes)");
      }
      if (o.in.size() - pos < 5 + n) break;
      std::string message = o.in.substr(pos + 5, n);
      pos += 5 + n;
      if (flag > 1) return Refuse(call, kInternal, "bad gRPC message flag " + std::to_string(flag));
      if (flag == 1) {
        auto encoding = ParseContentEncoding(call.encoding_);
        if (call.encoding_.empty() || call.encoding_ == "identity" || !encoding.ok())
          return Refuse(call, kInternal, "a compressed message without grpc-encoding");
        auto plain = Decompress(message, *encoding, port->options.max_message_bytes);
        if (!plain.ok()) return Refuse(call, kResourceExhausted, "the compressed message: " + plain.status().message());
        message = std::move(*plain);
      }
      if (o.manual_flow) o.unconsumed.push_back(5 + n);
      std::shared_ptr<H2Handler> handler = o.handler;  // held: the call may end inside
      handler->OnMessage(std::move(message));
    }
    if (o.closed || o.finished)
      o.in.clear();
    else
      o.in.erase(0, pos);
  }

  // The call's request broke a rule: answered with `code`, the handler cancelled.
  void Refuse(H2Call& call, int code, const std::string& message) {
    H2Call::Out& o = *call.out_;
    o.in.clear();
    if (o.manual_flow) {
      for (size_t n : o.unconsumed) nghttp2_session_consume(session, call.id_, n);
      o.unconsumed.clear();
    }
    auto handler = o.handler;
    FinishNow(call, code, message);
    if (handler) handler->OnCancel();
  }

  void SubmitHeaders(H2Call& call, bool with_data) {
    H2Call::Out& o = *call.out_;
    o.headers_sent = true;
    std::vector<std::string> encoded;  // -bin values, alive until submitted
    std::vector<nghttp2_nv> nv = {Header(":status", "200"), Header("content-type", "application/grpc"),
                                  Header("grpc-accept-encoding", "identity,deflate,gzip")};
    AppendMetadata(o.initial, &nv, &encoded);
    if (!with_data) AppendMetadata(o.trailers, &nv, &encoded);  // Trailers-Only
    if (!with_data) {
      nghttp2_submit_response(session, call.id_, nv.data(), nv.size(), nullptr);
      return;
    }
    nghttp2_data_provider provider;
    provider.source.ptr = &call;
    provider.read_callback = &H2Connection::ReadData;
    nghttp2_submit_response(session, call.id_, nv.data(), nv.size(), &provider);
  }

  static void AppendMetadata(const MetadataList& md, std::vector<nghttp2_nv>* nv, std::vector<std::string>* encoded) {
    encoded->reserve(encoded->size() + md.size());
    for (const auto& [k, v] : md) {
      if (EndsWith(k, "-bin")) {
        encoded->push_back(json::Base64Encode(v));
        nv->push_back(Header(k, encoded->back()));
      } else {
        nv->push_back(Header(k, v));
      }
    }
  }

  void DoFinish(H2Call& call, int code, const std::string& message, MetadataList trailing) {
    H2Call::Out& o = *call.out_;
    if (o.finished || o.closed) return;
    o.finished = true;
    if (o.timer) o.timer->cancel();
    o.trailers.clear();
    o.trailers.emplace_back("grpc-status", std::to_string(code));
    if (!message.empty()) o.trailers.emplace_back("grpc-message", PercentEncode(message));
    for (auto& kv : trailing) o.trailers.push_back(std::move(kv));
    if (!o.headers_sent) {
      SubmitHeaders(call, o.data_pos < o.data.size());
    } else if (o.deferred) {
      o.deferred = false;
      nghttp2_session_resume_data(session, call.id_);
    }
  }

  static ssize_t ReadData(nghttp2_session* session, int32_t, uint8_t* buf, size_t len, uint32_t* flags,
                          nghttp2_data_source* source, void*) {
    auto& call = *static_cast<H2Call*>(source->ptr);
    H2Call::Out& o = *call.out_;
    const size_t n = std::min(len, o.data.size() - o.data_pos);
    std::memcpy(buf, o.data.data() + o.data_pos, n);
    o.data_pos += n;
    if (o.data_pos == o.data.size()) {
      o.data.clear();
      o.data_pos = 0;
    }
    if (o.data.empty() && o.finished) {
      *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
      std::vector<std::string> encoded;
      std::vector<nghttp2_nv> nv;
      AppendMetadata(o.trailers, &nv, &encoded);
      nghttp2_submit_trailer(session, call.id_, nv.data(), nv.size());
      return static_cast<ssize_t>(n);
    }
    if (n == 0) {
      o.deferred = true;
      return NGHTTP2_ERR_DEFERRED;
    }
    return static_cast<ssize_t>(n);
  }

  // nghttp2's callbacks (user_data: the connection).
  static int OnBeginHeaders(nghttp2_session* s, const nghttp2_frame* f, void* user) {
    auto* c = static_cast<H2Connection*>(user);
    if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
    auto call = std::make_shared<H2Call>(c->shared_from_this(), f->hd.stream_id);
    call->peer_ = c->peer;
    nghttp2_session_set_stream_user_data(s, f->hd.stream_id, call.get());
    c->calls.emplace(f->hd.stream_id, std::move(call));
    return 0;
  }

  static int OnHeader(nghttp2_session*, const nghttp2_frame* f, const uint8_t* name, size_t namelen,
                      const uint8_t* value, size_t valuelen, uint8_t, void* user) {
    auto* c = static_cast<H2Connection*>(user);
    if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;  // trailers: ignored
    H2Call* call = c->CallOf(f->hd.stream_id);
    if (!call) return 0;
    call->header_bytes_ += namelen + valuelen + 32;
    if (call->header_bytes_ > c->port->options.max_header_bytes) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    const std::string_view k(reinterpret_cast<const char*>(name), namelen);
    const std::string_view v(reinterpret_cast<const char*>(value), valuelen);
    if (k == ":path") {
      call->path_ = v;
    } else if (k == ":method") {
      call->method_ = v;
    } else if (k == "content-type") {
      call->content_type_ = v;
    } else if (k == "grpc-encoding") {
      call->encoding_ = v;
    } else if (k == "grpc-timeout") {
      std::chrono::nanoseconds d;
      if (ParseGrpcTimeout(v, &d))
        call->deadline_ =
            std::chrono::system_clock::now() + std::chrono::duration_cast<std::chrono::system_clock::duration>(d);
    } else if (k.front() == ':' || k == "te" || k.substr(0, 5) == "grpc-") {
      // HTTP/2's and gRPC's own: not metadata
    } else if (EndsWith(k, "-bin")) {
      auto decoded = DecodeBinaryHeader(v);
      if (decoded.ok())
        call->metadata_.emplace_back(std::string(k), std::move(*decoded));
      else
        call->bad_header_ = true;
    } else {
      call->metadata_.emplace_back(std::string(k), std::string(v));
    }
    return 0;
  }

  static int OnFrameRecv(nghttp2_session*, const nghttp2_frame* f, void* user) {
    auto* c = static_cast<H2Connection*>(user);
    if (f->hd.type == NGHTTP2_PING) {
      if (f->hd.flags & NGHTTP2_FLAG_ACK) {
        if (c->awaiting_ping_ack) {
          c->awaiting_ping_ack = false;
          c->ScheduleKeepalive(c->port->options.keepalive_time);
        }
      } else {
        c->ClientPing();
      }
      return 0;
    }
    H2Call* call = c->CallOf(f->hd.stream_id);
    if (!call) return 0;
    if (f->hd.type == NGHTTP2_HEADERS && f->headers.cat == NGHTTP2_HCAT_REQUEST) {
      c->Begin(call->shared_from_this());
    }
    if ((f->hd.type == NGHTTP2_HEADERS || f->hd.type == NGHTTP2_DATA) && (f->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
      H2Call::Out& o = *call->out_;
      if (o.half_closed) return 0;
      o.half_closed = true;
      if (o.handler && !o.finished && !o.closed) {
        if (!o.in.empty()) {
          c->Refuse(*call, kInternal, "the stream ended inside a message");
        } else {
          auto keep = call->shared_from_this();  // the handler may finish (and the stream close) inline
          std::shared_ptr<H2Handler> handler = o.handler;
          handler->OnHalfClose();
        }
      }
    }
    return 0;
  }

  static int OnFrameSend(nghttp2_session*, const nghttp2_frame* f, void* user) {
    auto* c = static_cast<H2Connection*>(user);
    if (f->hd.type == NGHTTP2_DATA || f->hd.type == NGHTTP2_HEADERS) {
      c->pings_without_data = 0;
      c->ping_strikes = 0;
    }
    if (!(f->hd.flags & NGHTTP2_FLAG_END_STREAM)) return 0;
    H2Call* call = c->CallOf(f->hd.stream_id);
    if (call && call->out_->counted) {  // the answer is out
      call->out_->counted = false;
      c->port->CallAnswered();
    }
    return 0;
  }

  static int OnDataChunk(nghttp2_session* s, uint8_t, int32_t id, const uint8_t* data, size_t len, void* user) {
    auto* c = static_cast<H2Connection*>(user);
    H2Call* call = c->CallOf(id);
    if (!call) {
      nghttp2_session_consume(s, id, len);
      return 0;
    }
    c->OnData(*call, data, len);
    return 0;
  }

  static int OnStreamClose(nghttp2_session*, int32_t id, uint32_t, void* user) {
    auto* c = static_cast<H2Connection*>(user);
    auto it = c->calls.find(id);
    if (it == c->calls.end()) return 0;
    std::shared_ptr<H2Call> call = std::move(it->second);
    c->calls.erase(it);
    c->StreamGone(*call);
    return 0;
  }
};

}  // namespace inferd::grpcfe
