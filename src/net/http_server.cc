// The event-driven HTTP server of http_server.h on Boost.Asio and Boost.Beast: one coroutine per
// connection on a strand of its own, a fixed pool of I/O threads, worker pools for handlers.
#include "net/http_server.h"

#include <sys/resource.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cctype>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>

namespace arbiter::net {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::awaitable;
using asio::ip::tcp;
constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);
// After refusing a request, at most this much of what the client still sends is read and dropped.
constexpr std::size_t kMaxLingerBytes = 64 << 20;

bool EqualNoCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// %XX decoded (and '+' as a space in a query); a malformed escape stays as it is.
std::string Decode(std::string_view text, bool query) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '%' && i + 2 < text.size()) {
      const int hi = HexValue(text[i + 1]);
      const int lo = HexValue(text[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out.push_back(static_cast<char>(hi * 16 + lo));
        i += 2;
        continue;
      }
    }
    out.push_back(query && c == '+' ? ' ' : c);
  }
  return out;
}

std::vector<std::string_view> Split(std::string_view text, char sep) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  for (;;) {
    const std::size_t end = text.find(sep, start);
    parts.push_back(text.substr(start, end == std::string_view::npos ? end : end - start));
    if (end == std::string_view::npos) return parts;
    start = end + 1;
  }
}

struct RouteEntry {
  std::string method;
  std::vector<std::string> segments;  // of the pattern, after the leading '/'
  HttpHandler handler;
  int lane = 0;  // or HttpServer::kInline
};

// Whether the raw path's segments match the route; the captures (decoded) go to `matches`.
bool Match(const RouteEntry& route, const std::vector<std::string_view>& raw,
           std::vector<std::string>& matches) {
  if (raw.size() != route.segments.size()) return false;
  matches.clear();
  for (std::size_t i = 0; i < raw.size(); ++i) {
    const std::string& p = route.segments[i];
    const std::string segment = Decode(raw[i], false);
    if (p == "*") {
      if (segment.empty()) return false;
      matches.push_back(segment);
    } else if (p == "#") {
      if (segment.empty() ||
          !std::all_of(segment.begin(), segment.end(), [](char c) { return c >= '0' && c <= '9'; }))
        return false;
      matches.push_back(segment);
    } else if (p.find('|') != std::string::npos) {
      bool any = false;
      for (std::string_view option : Split(p, '|')) any = any || option == segment;
      if (!any) return false;
      matches.push_back(segment);
    } else if (p != segment) {
      return false;
    }
  }
  return true;
}

// What a handler asked to send, queued for its connection's coroutine.
struct Output {
  enum class Kind { kResponse, kStart, kChunks, kEnd, kAbandoned } kind = Kind::kResponse;
  HttpResponse response;  // kResponse; kStart: status, content type, headers
  std::vector<SharedText> chunks;
  std::function<void(bool)> written;
};

// The connection as its exchanges see it.
class Sink {
 public:
  virtual ~Sink() = default;
  virtual void Enqueue(Output output) = 0;
};

class Exchange final : public HttpExchange {
 public:
  explicit Exchange(std::weak_ptr<Sink> sink) : sink_(std::move(sink)) {}
  ~Exchange() override {
    // A handler that let go without answering: the connection answers 500 (or ends the stream).
    if (!ended_.load()) Send(Output{Output::Kind::kAbandoned, {}, {}, {}});
  }

  void Respond(HttpResponse response) override {
    if (started_.exchange(true)) return;
    ended_ = true;
    Send(Output{Output::Kind::kResponse, std::move(response), {}, {}});
  }
  void Start(int status, std::string content_type, HttpHeaders headers) override {
    if (started_.exchange(true)) return;
    HttpResponse head;
    head.status = status;
    head.content_type = std::move(content_type);
    head.headers = std::move(headers);
    Send(Output{Output::Kind::kStart, std::move(head), {}, {}});
  }
  void Write(std::vector<SharedText> chunks, std::function<void(bool)> written) override {
    if (!started_.load() || ended_.load() || closed_.load()) {
      if (written) written(false);
      return;
    }
    Send(Output{Output::Kind::kChunks, {}, std::move(chunks), std::move(written)});
  }
  void End() override {
    if (!started_.load() || ended_.exchange(true)) return;
    Send(Output{Output::Kind::kEnd, {}, {}, {}});
  }
  bool closed() const override { return closed_.load(); }
  void OnDone(std::function<void()> done) override {
    std::unique_lock lock(mu_);
    if (done_fired_) {
      lock.unlock();
      done();
      return;
    }
    done_ = std::move(done);
  }

  // The connection's side.
  void MarkClosed() { closed_ = true; }
  void FireDone() {
    std::function<void()> done;
    {
      std::lock_guard lock(mu_);
      if (done_fired_) return;
      done_fired_ = true;
      done.swap(done_);
    }
    if (done) done();
  }

 private:
  void Send(Output output) {
    if (std::shared_ptr<Sink> sink = sink_.lock()) {
      sink->Enqueue(std::move(output));
    } else {
      closed_ = true;
      if (output.written) output.written(false);
    }
  }

  std::weak_ptr<Sink> sink_;
  std::atomic<bool> started_{false}, ended_{false}, closed_{false};
  std::mutex mu_;
  std::function<void()> done_;  // GUARDED_BY(mu_)
  bool done_fired_ = false;     // GUARDED_BY(mu_)
};

}  // namespace

// ---- HttpRequest ----

namespace {
const std::string* Find(const HttpHeaders& list, std::string_view name, bool any_case) {
  for (const auto& [k, v] : list) {
    if (any_case ? EqualNoCase(k, name) : k == name) return &v;
  }
  return nullptr;
}
}  // namespace

bool HttpRequest::HasParam(std::string_view name) const {
  return Find(query, name, false) != nullptr;
}
std::string HttpRequest::Param(std::string_view name) const {
  const std::string* v = Find(query, name, false);
  return v ? *v : std::string();
}
bool HttpRequest::HasHeader(std::string_view name) const {
  return Find(headers, name, true) != nullptr;
}
std::string HttpRequest::Header(std::string_view name) const {
  const std::string* v = Find(headers, name, true);
  return v ? *v : std::string();
}

std::size_t RaiseFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 1024;
  if (limit.rlim_cur < limit.rlim_max) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
  }
  return static_cast<std::size_t>(limit.rlim_cur);
}

// ---- The server ----

struct HttpServer::Impl {
  explicit Impl(HttpServerOptions o)
      : options(std::move(o)), io(std::max(1, options.io_threads)), acceptor(io) {
    if (options.lanes.empty()) options.lanes.push_back(1);
    for (int count : options.lanes) {
      lanes.push_back(
          std::make_unique<asio::thread_pool>(static_cast<std::size_t>(std::max(1, count))));
    }
  }

  // Declared first, destroyed last: the connections' coroutines, destroyed with `io`, count.
  std::atomic<std::uint64_t> open{0}, accepted{0}, refused{0}, requests{0};
  HttpServerOptions options;
  asio::io_context io;
  std::vector<std::unique_ptr<asio::thread_pool>> lanes;
  std::optional<asio::ssl::context> tls;
  tcp::acceptor acceptor;
  std::vector<RouteEntry> routes;
  std::vector<std::thread> threads;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  std::atomic<bool> stopped{false};
  int port = 0;
  std::size_t max_connections = 0;

  HttpResponse Error(int status, std::string_view what) const {
    if (options.error_response) return options.error_response(status, what);
    HttpResponse r;
    r.status = status;
    r.content_type = "text/plain";
    r.body = std::string(what) + "\n";
    return r;
  }

  void Dispatch(HttpRequest request, const std::shared_ptr<Exchange>& exchange);
  awaitable<void> Accept();
  template <class Stream>
  awaitable<void> Serve(std::shared_ptr<Stream> stream, std::string peer);
};

namespace {

// One connection: its stream, its queue of output, the coroutine that reads requests and writes
// what its exchanges queue.
template <class Stream>
class Connection final : public Sink, public std::enable_shared_from_this<Connection<Stream>> {
 public:
  Connection(Stream& stream, asio::any_io_executor executor) : stream_(stream), signal_(executor) {}

  void Enqueue(Output output) override {
    asio::post(signal_.get_executor(), [self = this->shared_from_this(), o = std::move(output)]() {
      self->out_.push_back(std::move(o));
      self->signal_.cancel();
    });
  }

  // Writes what the exchange queues until it is complete. Returns false when the connection is
  // to close (a write failed, or a stream was abandoned midway).
  awaitable<bool> Drain(Exchange& exchange, bool keep_alive,
                        std::chrono::milliseconds write_timeout,
                        const std::function<HttpResponse(int, std::string_view)>& error) {
    bool ok = true;
    bool streaming = false;
    for (;;) {
      while (!out_.empty()) {
        Output o = std::move(out_.front());
        out_.pop_front();
        if (!ok) {
          if (o.written) o.written(false);
          continue;
        }
        beast::get_lowest_layer(stream_).expires_after(write_timeout);
        beast::error_code ec;
        switch (o.kind) {
          case Output::Kind::kAbandoned:
            if (streaming) {
              ok = false;  // a stream cut short: the client sees the connection close
              exchange.MarkClosed();
              break;
            }
            o.response = error(500, "the handler gave no answer");
            [[fallthrough]];
          case Output::Kind::kResponse: {
            http::response<http::string_body> res{static_cast<http::status>(o.response.status), 11};
            res.set(http::field::content_type, o.response.content_type);
            for (const auto& [k, v] : o.response.headers) res.set(k, v);
            res.body() = std::move(o.response.body);
            res.keep_alive(keep_alive);
            res.prepare_payload();
            std::tie(ec, std::ignore) = co_await http::async_write(stream_, res, kTuple);
            ok = !ec;
            if (!ok) exchange.MarkClosed();
            exchange.FireDone();
            co_return ok&& keep_alive;
          }
          case Output::Kind::kStart: {
            http::response<http::empty_body> res{static_cast<http::status>(o.response.status), 11};
            res.set(http::field::content_type, o.response.content_type);
            for (const auto& [k, v] : o.response.headers) res.set(k, v);
            res.keep_alive(keep_alive);
            res.chunked(true);
            http::response_serializer<http::empty_body> sr{res};
            std::tie(ec, std::ignore) = co_await http::async_write_header(stream_, sr, kTuple);
            streaming = true;
            ok = !ec;
            break;
          }
          case Output::Kind::kChunks: {
            std::vector<asio::const_buffer> buffers;
            buffers.reserve(o.chunks.size());
            for (const SharedText& c : o.chunks) {
              if (c && !c->empty()) buffers.emplace_back(c->data(), c->size());
            }
            if (!buffers.empty()) {
              std::tie(ec, std::ignore) =
                  co_await asio::async_write(stream_, http::make_chunk(buffers), kTuple);
            }
            ok = !ec;
            if (o.written) o.written(ok);
            break;
          }
          case Output::Kind::kEnd:
            std::tie(ec, std::ignore) =
                co_await asio::async_write(stream_, http::make_chunk_last(), kTuple);
            ok = !ec;
            if (!ok) exchange.MarkClosed();
            exchange.FireDone();
            co_return ok&& keep_alive;
        }
        if (!ok) exchange.MarkClosed();
      }
      if (!ok) {
        exchange.FireDone();
        co_return false;
      }
      // Nothing queued: wait until an exchange's Enqueue wakes this (it cancels the timer).
      signal_.expires_at(asio::steady_timer::time_point::max());
      co_await signal_.async_wait(kTuple);
    }
  }

  // Lets the exchange's late calls find nothing to write to, and says why.
  void Fail(Exchange& exchange) {
    exchange.MarkClosed();
    for (Output& o : out_) {
      if (o.written) o.written(false);
    }
    out_.clear();
    exchange.FireDone();
  }

 private:
  Stream& stream_;
  asio::steady_timer signal_;
  std::deque<Output> out_;
};

std::string PeerOf(const tcp::socket& socket) {
  beast::error_code ec;
  tcp::endpoint endpoint = socket.remote_endpoint(ec);
  if (ec) return "";
  asio::ip::address address = endpoint.address();
  if (address.is_v6() && address.to_v6().is_v4_mapped()) {
    address = asio::ip::make_address_v4(asio::ip::v4_mapped, address.to_v6());
  }
  return address.to_string();
}

template <class Stream>
tcp::socket& SocketOf(Stream& stream) {
  return beast::get_lowest_layer(stream).socket();
}

}  // namespace

void HttpServer::Impl::Dispatch(HttpRequest request, const std::shared_ptr<Exchange>& exchange) {
  const std::size_t q = request.target.find('?');
  const std::string_view raw_path = std::string_view(request.target).substr(0, q);
  if (q != std::string::npos) {
    for (std::string_view pair : Split(std::string_view(request.target).substr(q + 1), '&')) {
      if (pair.empty()) continue;
      const std::size_t eq = pair.find('=');
      request.query.emplace_back(
          Decode(pair.substr(0, eq), true),
          eq == std::string_view::npos ? std::string() : Decode(pair.substr(eq + 1), true));
    }
  }
  request.path = Decode(raw_path, false);
  std::vector<std::string_view> raw;
  if (raw_path.size() > 1 && raw_path[0] == '/') raw = Split(raw_path.substr(1), '/');
  const RouteEntry* found = nullptr;
  for (const RouteEntry& route : routes) {
    if (route.method == request.method && Match(route, raw, request.matches)) {
      found = &route;
      break;
    }
  }
  if (!found) {
    exchange->Respond(Error(404, "no such endpoint"));
    return;
  }
  const HttpHandler* handler = &found->handler;
  if (found->lane == kInline) return (*handler)(request, exchange);
  asio::post(*lanes[static_cast<std::size_t>(found->lane)],
             [handler, request = std::move(request), exchange]() mutable {
               (*handler)(request, exchange);
             });
}

template <class Stream>
awaitable<void> HttpServer::Impl::Serve(std::shared_ptr<Stream> stream, std::string peer) {
  struct Count {
    std::atomic<std::uint64_t>& open;
    ~Count() { open.fetch_sub(1); }
  } count{open};
  auto connection = std::make_shared<Connection<Stream>>(*stream, SocketOf(*stream).get_executor());
  beast::flat_buffer buffer;
  beast::error_code ec;
  if constexpr (!std::is_same_v<Stream, beast::tcp_stream>) {
    beast::get_lowest_layer(*stream).expires_after(options.idle_timeout);
    std::tie(ec) = co_await stream->async_handshake(asio::ssl::stream_base::server, kTuple);
    if (ec) co_return;
  }
  const auto refuse = [&](int status, std::string_view what) -> awaitable<void> {
    HttpResponse r = Error(status, what);
    http::response<http::string_body> res{static_cast<http::status>(r.status), 11};
    res.set(http::field::content_type, r.content_type);
    res.body() = std::move(r.body);
    res.keep_alive(false);
    res.prepare_payload();
    beast::get_lowest_layer(*stream).expires_after(options.write_timeout);
    co_await http::async_write(*stream, res, kTuple);
  };
  while (!stopped.load()) {
    http::request_parser<http::string_body> parser;
    parser.header_limit(static_cast<std::uint32_t>(options.max_header_bytes));
    parser.body_limit(options.max_body_bytes);
    beast::get_lowest_layer(*stream).expires_after(options.idle_timeout);
    std::tie(ec, std::ignore) = co_await http::async_read_header(*stream, buffer, parser, kTuple);
    if (!ec && parser.get()[http::field::expect] == "100-continue" && !parser.is_done()) {
      http::response<http::empty_body> cont{http::status::continue_, 11};
      std::tie(ec, std::ignore) = co_await http::async_write(*stream, cont, kTuple);
    }
    if (!ec && !parser.is_done()) {
      std::tie(ec, std::ignore) = co_await http::async_read(*stream, buffer, parser, kTuple);
    }
    if (ec) {
      bool answered = true;
      if (ec == http::error::body_limit) {
        co_await refuse(413, "body too large");
      } else if (ec == http::error::header_limit) {
        co_await refuse(431, "headers too large");
      } else if (ec.category() == beast::error_code(http::error::bad_target).category() &&
                 ec != http::error::end_of_stream && ec != http::error::partial_message) {
        co_await refuse(400, "malformed request");
      } else {
        answered = false;  // closed or timed out
      }
      if (answered && std::is_same_v<Stream, beast::tcp_stream>) {
        // A lingering close: the client may still be sending the body it was refused for. What
        // it sends is read and dropped for a moment (a bounded amount), so that it reads the
        // answer rather than a reset.
        SocketOf(*stream).shutdown(tcp::socket::shutdown_send, ec);
        beast::get_lowest_layer(*stream).expires_after(std::chrono::seconds(2));
        std::array<char, 16384> sink;
        std::size_t dropped = 0;
        while (dropped < kMaxLingerBytes) {
          auto [read_ec, n] =
              co_await beast::get_lowest_layer(*stream).async_read_some(asio::buffer(sink), kTuple);
          if (read_ec) break;
          dropped += n;
        }
      }
      break;
    }
    beast::get_lowest_layer(*stream).expires_never();
    requests.fetch_add(1, std::memory_order_relaxed);
    http::request<http::string_body> message = parser.release();
    const bool keep_alive = message.keep_alive();
    HttpRequest request;
    request.method = std::string(message.method_string());
    request.target = std::string(message.target());
    request.peer = peer;
    request.headers.reserve(8);
    for (const auto& field : message) {
      request.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
    }
    request.body = std::move(message.body());
    auto exchange = std::make_shared<Exchange>(std::weak_ptr<Sink>(connection));
    Dispatch(std::move(request), exchange);
    const bool again =
        co_await connection->Drain(*exchange, keep_alive, options.write_timeout,
                                   [this](int s, std::string_view w) { return Error(s, w); });
    if (!again) {
      connection->Fail(*exchange);
      break;
    }
  }
  beast::get_lowest_layer(*stream).expires_after(std::chrono::seconds(2));
  if constexpr (!std::is_same_v<Stream, beast::tcp_stream>) {
    co_await stream->async_shutdown(kTuple);
  }
  SocketOf(*stream).shutdown(tcp::socket::shutdown_send, ec);
  SocketOf(*stream).close(ec);
}

awaitable<void> HttpServer::Impl::Accept() {
  for (;;) {
    auto [ec, accepted_socket] = co_await acceptor.async_accept(asio::make_strand(io), kTuple);
    tcp::socket socket(std::move(accepted_socket));
    if (ec) {
      if (ec == asio::error::operation_aborted || stopped.load()) co_return;
      // Out of file descriptors (or another transient error): wait a little, then accept again.
      asio::steady_timer pause(io, std::chrono::milliseconds(50));
      co_await pause.async_wait(kTuple);
      continue;
    }
    accepted.fetch_add(1, std::memory_order_relaxed);
    if (open.load() >= max_connections) {
      refused.fetch_add(1, std::memory_order_relaxed);
      // Told why, without a read: the client's request stays unread.
      HttpResponse r = Error(503, "too many connections");
      const std::string text =
          "HTTP/1.1 503 Service Unavailable\r\nContent-Type: " + r.content_type +
          "\r\nContent-Length: " + std::to_string(r.body.size()) + "\r\nConnection: close\r\n\r\n" +
          r.body;
      if (!tls) {
        socket.non_blocking(true, ec);
        socket.send(asio::buffer(text), 0, ec);
      }
      socket.close(ec);
      continue;
    }
    open.fetch_add(1);
    socket.set_option(tcp::no_delay(true), ec);
    std::string peer = PeerOf(socket);
    const asio::any_io_executor executor = socket.get_executor();
    if (tls) {
      auto stream = std::make_shared<beast::ssl_stream<beast::tcp_stream>>(std::move(socket), *tls);
      asio::co_spawn(executor, Serve(std::move(stream), std::move(peer)), asio::detached);
    } else {
      auto stream = std::make_shared<beast::tcp_stream>(std::move(socket));
      asio::co_spawn(executor, Serve(std::move(stream), std::move(peer)), asio::detached);
    }
  }
}

HttpServer::HttpServer(HttpServerOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}

HttpServer::~HttpServer() { Stop(); }

void HttpServer::Route(std::string method, std::string pattern, HttpHandler handler, int lane) {
  if (lane != kInline && (lane < 0 || static_cast<std::size_t>(lane) >= impl_->lanes.size()))
    lane = 0;
  RouteEntry route{std::move(method), {}, std::move(handler), lane};
  std::string_view p = pattern;
  if (!p.empty() && p[0] == '/') p.remove_prefix(1);
  for (std::string_view s : Split(p, '/')) route.segments.emplace_back(s);
  impl_->routes.push_back(std::move(route));
}

Status HttpServer::Listen() {
  Impl& s = *impl_;
  const HttpServerOptions& o = s.options;
  const std::string where = o.host + ":" + std::to_string(o.port);
  if (!o.tls_cert.empty()) {
    s.tls.emplace(asio::ssl::context::tls_server);
    beast::error_code ec;
    s.tls->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                           asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                           asio::ssl::context::no_tlsv1_1,
                       ec);
    s.tls->use_certificate_chain_file(o.tls_cert, ec);
    if (!ec) s.tls->use_private_key_file(o.tls_key, asio::ssl::context::pem, ec);
    if (!ec && !o.tls_client_ca.empty()) {
      s.tls->load_verify_file(o.tls_client_ca, ec);
      s.tls->set_verify_mode(asio::ssl::verify_peer | asio::ssl::verify_fail_if_no_peer_cert);
    }
    if (!ec && SSL_CTX_check_private_key(s.tls->native_handle()) != 1) {
      ec = asio::error::invalid_argument;
    }
    if (ec) {
      return Status::InvalidArgument(
          "cannot use the certificate " + o.tls_cert + " with the key " + o.tls_key +
              (o.tls_client_ca.empty() ? "" : " and the CA " + o.tls_client_ca) +
              ": unreadable, not PEM, or not a pair",
          "--tls-cert");
    }
  }
  beast::error_code ec;
  const asio::ip::address address =
      asio::ip::make_address(o.host == "localhost" ? "127.0.0.1" : o.host, ec);
  if (ec) {
    return Status::InvalidArgument("not an IP address of this machine: " + o.host, "--listen");
  }
  const tcp::endpoint endpoint(address, static_cast<unsigned short>(o.port));
  s.acceptor.open(endpoint.protocol(), ec);
  // SO_REUSEADDR only (a restarted server takes its port back from connections in TIME_WAIT);
  // never SO_REUSEPORT, with which a second server would silently share the port.
  if (!ec) s.acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) s.acceptor.bind(endpoint, ec);
  if (!ec) s.acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return Status::FromCode(StatusCode::kUnavailable,
                            "cannot listen on " + where + ": " + ec.message() +
                                " (another server? not this machine's address?)",
                            "--listen");
  }
  s.port = s.acceptor.local_endpoint().port();
  const std::size_t files = RaiseFileLimit();
  s.max_connections =
      o.max_connections > 0 ? o.max_connections : (files > 512 ? files - 256 : files / 2);
  s.work.emplace(s.io.get_executor());
  asio::co_spawn(s.io, s.Accept(), asio::detached);
  for (int i = 0; i < std::max(1, o.io_threads); ++i) {
    s.threads.emplace_back([&s] { s.io.run(); });
  }
  return Status::Ok();
}

int HttpServer::port() const { return impl_->port; }

void HttpServer::Stop() {
  Impl& s = *impl_;
  if (s.stopped.exchange(true)) return;
  asio::post(s.io, [&s] {
    beast::error_code ec;
    s.acceptor.close(ec);
  });
  s.work.reset();
  s.io.stop();
  for (std::thread& t : s.threads) t.join();
  s.threads.clear();
  for (auto& lane : s.lanes) lane->stop();
  for (auto& lane : s.lanes) lane->join();
}

void HttpServer::Post(std::function<void()> fn, int lane) {
  if (lane < 0 || static_cast<std::size_t>(lane) >= impl_->lanes.size()) lane = 0;
  asio::post(*impl_->lanes[static_cast<std::size_t>(lane)], std::move(fn));
}

namespace {
class TimerImpl final : public HttpServer::Timer, public std::enable_shared_from_this<TimerImpl> {
 public:
  TimerImpl(asio::io_context& io, std::function<void()> fn)
      : timer_(asio::make_strand(io)), fn_(std::move(fn)) {}
  void Arm(std::chrono::milliseconds delay) {
    timer_.expires_after(delay);
    timer_.async_wait([self = shared_from_this()](beast::error_code) {
      std::function<void()> fn;
      {
        std::lock_guard lock(self->mu_);
        if (self->done_) return;
        self->done_ = true;
        fn.swap(self->fn_);
      }
      if (fn) fn();
    });
  }
  void Cancel() override {
    std::function<void()> fn;  // released outside the lock (it may hold exchanges)
    {
      std::lock_guard lock(mu_);
      if (done_) return;
      done_ = true;
      fn.swap(fn_);
    }
    asio::post(timer_.get_executor(), [self = shared_from_this()] { self->timer_.cancel(); });
  }

 private:
  asio::steady_timer timer_;
  std::mutex mu_;
  bool done_ = false;         // GUARDED_BY(mu_): fired or cancelled
  std::function<void()> fn_;  // GUARDED_BY(mu_)
};
}  // namespace

std::shared_ptr<HttpServer::Timer> HttpServer::After(std::chrono::milliseconds delay,
                                                     std::function<void()> fn) {
  auto timer = std::make_shared<TimerImpl>(impl_->io, std::move(fn));
  timer->Arm(delay);
  return timer;
}

HttpServerStats HttpServer::stats() const {
  return {impl_->open.load(), impl_->accepted.load(), impl_->refused.load(),
          impl_->requests.load()};
}

std::size_t HttpServer::max_connections() const { return impl_->max_connections; }

}  // namespace arbiter::net
