#include "frontends/grpc/h2_port.h"

#include "frontends/grpc/h2_connection.h"

namespace inferd::grpcfe {

std::string PercentEncode(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    if (c >= 0x20 && c <= 0x7e && c != '%') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

bool ParseGrpcTimeout(std::string_view v, std::chrono::nanoseconds* out) {
  if (v.size() < 2 || v.size() > 9) return false;  // at most 8 digits and a unit
  int64_t n = 0;
  for (char c : v.substr(0, v.size() - 1)) {
    if (c < '0' || c > '9') return false;
    n = n * 10 + (c - '0');
  }
  using namespace std::chrono;
  constexpr int64_t kMaxSeconds = int64_t{100} * 365 * 24 * 3600;  // longer: as good as none, and no overflow
  switch (v.back()) {
    case 'H':
      *out = seconds(std::min(kMaxSeconds, n * 3600));
      return true;
    case 'M':
      *out = seconds(std::min(kMaxSeconds, n * 60));
      return true;
    case 'S':
      *out = seconds(std::min(kMaxSeconds, n));
      return true;
    case 'm':
      *out = milliseconds(n);
      return true;
    case 'u':
      *out = microseconds(n);
      return true;
    case 'n':
      *out = nanoseconds(n);
      return true;
    default:
      return false;
  }
}

H2Call::H2Call(std::shared_ptr<H2Connection> connection, int32_t stream_id)
    : connection_(std::move(connection)), id_(stream_id), out_(std::make_unique<Out>()) {}

H2Call::~H2Call() = default;

std::string_view H2Call::Metadata(std::string_view key) const {
  for (const auto& [k, v] : metadata_)
    if (k == key) return v;
  return {};
}

void H2Call::SendInitialMetadata(MetadataList md) {
  net::dispatch(connection_->ioc, [self = shared_from_this(), md = std::move(md)]() mutable {
    H2Connection& c = *self->connection_;
    Out& o = *self->out_;
    if (c.closed || o.closed || o.finished || o.headers_sent) return;
    for (auto& kv : md) o.initial.push_back(std::move(kv));
    c.SubmitHeaders(*self, /*with_data=*/true);
    c.Flush();
  });
}

void H2Call::SendMessage(std::string message) {
  std::string framed(5 + message.size(), '\0');
  const uint32_t n = static_cast<uint32_t>(message.size());
  framed[1] = static_cast<char>(n >> 24);
  framed[2] = static_cast<char>(n >> 16);
  framed[3] = static_cast<char>(n >> 8);
  framed[4] = static_cast<char>(n);
  std::memcpy(framed.data() + 5, message.data(), message.size());
  net::dispatch(connection_->ioc, [self = shared_from_this(), framed = std::move(framed)]() mutable {
    H2Connection& c = *self->connection_;
    Out& o = *self->out_;
    if (c.closed || o.closed || o.finished) return;
    o.data.append(framed);
    if (!o.headers_sent) {
      c.SubmitHeaders(*self, /*with_data=*/true);
    } else if (o.deferred) {
      o.deferred = false;
      nghttp2_session_resume_data(c.session, self->id_);
    }
    c.Flush();
  });
}

void H2Call::Finish(int code, std::string message, MetadataList trailing) {
  net::dispatch(connection_->ioc, [self = shared_from_this(), code, message = std::move(message),
                                   trailing = std::move(trailing)]() mutable {
    H2Connection& c = *self->connection_;
    if (c.closed) return;
    c.DoFinish(*self, code, message, std::move(trailing));
    c.Flush();
  });
}

void H2Call::Reply(MetadataList initial, std::string framed, int code, std::string message) {
  net::dispatch(connection_->ioc, [self = shared_from_this(), initial = std::move(initial), framed = std::move(framed),
                                   code, message = std::move(message)]() mutable {
    H2Connection& c = *self->connection_;
    Out& o = *self->out_;
    if (c.closed || o.closed || o.finished) return;
    for (auto& kv : initial) o.initial.push_back(std::move(kv));
    if (!framed.empty()) {
      if (o.data.empty()) {
        o.data = std::move(framed);
        o.data_pos = 0;
      } else {
        o.data.append(framed);
      }
    }
    c.DoFinish(*self, code, message, {});
    c.Flush();
  });
}

void H2Call::Consumed(size_t) {
  net::dispatch(connection_->ioc, [self = shared_from_this()] {
    H2Connection& c = *self->connection_;
    Out& o = *self->out_;
    if (c.closed || o.unconsumed.empty()) return;
    const size_t n = o.unconsumed.front();
    o.unconsumed.pop_front();
    if (nghttp2_session_consume(c.session, self->id_, n) != 0) nghttp2_session_consume_connection(c.session, n);
    c.Flush();
  });
}

std::string H2Port::ServeBytes(std::string_view client_bytes, size_t chunk) {
  std::string answered;
  net::io_context ioc(1);
  auto c = std::make_shared<H2Connection>(impl_.get(), ioc, tcp::socket(ioc));
  c->memory = &answered;
  c->peer = "fuzz:0";
  c->StartSession();
  c->Flush();
  chunk = std::max<size_t>(1, chunk);
  for (size_t at = 0; at < client_bytes.size() && !c->closed; at += chunk) {
    const size_t n = std::min(chunk, client_bytes.size() - at);
    c->in_recv = true;
    const ssize_t rv =
        nghttp2_session_mem_recv(c->session, reinterpret_cast<const uint8_t*>(client_bytes.data() + at), n);
    c->in_recv = false;
    c->Flush();
    ioc.poll();  // answers the handlers gave from "another thread"
    if (rv < 0) break;
  }
  c->Close("end of input");
  ioc.poll();
  return answered;
}

void H2Port::Impl::Accept() {
  net::io_context& target = *iocs[next_ioc];
  next_ioc = (next_ioc + 1) % iocs.size();
  acceptor->async_accept(target, [this, &target](boost::system::error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted || !acceptor->is_open()) return;
    if (ec) {
      spdlog::warn("gRPC port: accept failed: {}", ec.message());
      auto timer = std::make_shared<net::steady_timer>(*iocs[0], std::chrono::milliseconds(10));
      timer->async_wait([this, timer](boost::system::error_code) { Accept(); });
      return;
    }
    auto c = std::make_shared<H2Connection>(this, target, std::move(socket));
    c->counted = true;
    {
      MutexLock g(&mu);
      connections.emplace(c.get(), c);
      ++open_connections;
    }
    net::post(target, [c] { c->Start(); });
    Accept();
  });
}

H2Port::H2Port(H2PortOptions options, H2Dispatch dispatch) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
  impl_->dispatch = std::move(dispatch);
  nghttp2_session_callbacks* cb = nullptr;
  nghttp2_session_callbacks_new(&cb);
  nghttp2_session_callbacks_set_on_begin_headers_callback(cb, &H2Connection::OnBeginHeaders);
  nghttp2_session_callbacks_set_on_header_callback(cb, &H2Connection::OnHeader);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cb, &H2Connection::OnFrameRecv);
  nghttp2_session_callbacks_set_on_frame_send_callback(cb, &H2Connection::OnFrameSend);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, &H2Connection::OnDataChunk);
  nghttp2_session_callbacks_set_on_stream_close_callback(cb, &H2Connection::OnStreamClose);
  impl_->callbacks = cb;
  nghttp2_option_new(&impl_->session_options);
  nghttp2_option_set_no_auto_window_update(impl_->session_options, 1);
  nghttp2_option_set_max_send_header_block_length(impl_->session_options, 1 << 20);
}

H2Port::~H2Port() {
  Stop();
  impl_->iocs.clear();  // handlers still queued (from model workers, after the stop) free their connections
  nghttp2_session_callbacks_del(impl_->callbacks);
  nghttp2_option_del(impl_->session_options);
}

Status H2Port::Start() {
  Impl& m = *impl_;
  const int threads = std::max(1, m.options.threads);
  for (int i = 0; i < threads; ++i) {
    m.iocs.push_back(std::make_unique<net::io_context>(1));
    m.work.push_back(net::make_work_guard(*m.iocs.back()));
  }
  const std::string where = m.options.host + ":" + std::to_string(m.options.port);
  boost::system::error_code ec;
  auto addr = net::ip::make_address(m.options.host, ec);
  if (ec) return Status::InvalidArgument("gRPC: invalid host '" + m.options.host + "': " + ec.message());
  const tcp::endpoint ep(addr, m.options.port);
  m.acceptor.emplace(*m.iocs[0]);
  m.acceptor->open(ep.protocol(), ec);
  if (!ec) m.acceptor->set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) m.acceptor->bind(ep, ec);
  if (!ec) m.acceptor->listen(net::socket_base::max_listen_connections, ec);
  if (ec) return Status::Unavailable("gRPC: cannot listen on " + where + ": " + ec.message());
  m.port = m.acceptor->local_endpoint().port();
  m.Accept();
  for (auto& ioc : m.iocs)
    m.threads.emplace_back([&m, io = ioc.get()] { io::RunWithIdleSpin(*io, m.options.idle_spin); });
  return Status::OK();
}

uint16_t H2Port::port() const { return impl_->port; }
uint64_t H2Port::ping_strikeouts() const { return impl_->ping_strikeouts.load(std::memory_order_relaxed); }
uint64_t H2Port::keepalive_timeouts() const { return impl_->keepalive_timeouts.load(std::memory_order_relaxed); }

void H2Port::StopAccepting() {
  Impl& m = *impl_;
  if (!m.acceptor || m.draining.exchange(true)) return;
  net::post(*m.iocs[0], [&m] {
    boost::system::error_code ec;
    m.acceptor->close(ec);
  });
  for (auto& c : m.Connections()) {
    net::post(c->ioc, [c] {
      if (c->closed) return;
      c->GoAway();
      c->Flush();
    });
  }
}

bool H2Port::WaitForCalls(std::chrono::steady_clock::time_point deadline) {
  Impl& m = *impl_;
  MutexLock g(&m.mu);
  while (m.open_calls > 0) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return false;
    m.calls_cv.WaitForReal(&m.mu, deadline - now);
  }
  return true;
}

void H2Port::Stop() {
  Impl& m = *impl_;
  if (m.threads.empty()) {  // never started, or a failed Start
    m.acceptor.reset();
    m.work.clear();
    return;
  }
  StopAccepting();
  // Answers already handed to nghttp2 are written first (bounded: a client that reads nothing is cut off).
  for (auto& c : m.Connections()) {
    net::post(c->ioc, [c] { c->CloseWhenWritten(); });
  }
  {
    MutexLock g(&m.mu);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (m.open_connections > 0) {
      const auto now = std::chrono::steady_clock::now();
      if (now >= deadline) break;
      m.calls_cv.WaitForReal(&m.mu, deadline - now);
    }
  }
  for (auto& c : m.Connections()) {
    net::post(c->ioc, [c] { c->Close("the port stops"); });
  }
  m.work.clear();
  for (auto& ioc : m.iocs) {
    // Runs what is queued (the closes above), then ends.
    net::post(*ioc, [io = ioc.get()] { io->stop(); });
  }
  for (auto& t : m.threads) t.join();
  m.threads.clear();
  m.acceptor.reset();
}

}  // namespace inferd::grpcfe
