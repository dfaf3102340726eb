// An event-driven HTTP/1.1 server (Boost.Asio and Boost.Beast, behind this header): a fixed number
// of threads serve every connection, whatever their number (docs/design/server.md).
//
// - I/O threads (`io_threads`) accept, read, parse and write. They never block: an idle
//   keep-alive connection, a long poll or an event stream costs a socket and a little memory,
//   no thread.
// - Lanes, pools of worker threads of their own (`lanes`), run the handlers that may wait for a
//   lock or compute; each route names its lane, so that one kind of request waiting (thousands
//   of agents' syncs, a log asked of another server) never queues another kind behind it.
//   kInline handlers (health checks) run on the I/O thread that read the request.
// - A handler answers through its exchange, now or later and from any thread: a whole response
//   (Respond), or a stream of chunks (Start, Write, End). Timers (After) wake deferred work
//   without a thread waiting.
//
// Requests are read with limits on header and body sizes and on time (a client that sends slowly
// is cut off); the server's own refusals (no route, too large, malformed) are answered through
// `error_response`, so that they speak the API's error format.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "arbiter/status.h"

namespace arbiter::net {

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string target;  // as sent: path and query
  std::string path;    // percent-decoded, without the query
  HttpHeaders query;   // the query's parameters, decoded, in order
  HttpHeaders headers;
  std::string body;
  std::string peer;                  // the client's IP address
  std::vector<std::string> matches;  // the route's captures (segments), in order

  bool HasParam(std::string_view name) const;
  std::string Param(std::string_view name) const;  // "" when absent
  bool HasHeader(std::string_view name) const;     // names compare without case
  std::string Header(std::string_view name) const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  HttpHeaders headers;
};

// A chunk of a streamed body, shared: the same text may be written to many streams (an event to
// every watcher) without a copy per stream.
using SharedText = std::shared_ptr<const std::string>;

// The answer side of one request. Every method may be called from any thread; only the first of
// Respond and Start counts, and nothing after End.
class HttpExchange {
 public:
  virtual ~HttpExchange() = default;
  // The whole response.
  virtual void Respond(HttpResponse response) = 0;
  // A streamed response (chunked): its head now, its body by Write, finished by End.
  virtual void Start(int status, std::string content_type, HttpHeaders headers = {}) = 0;
  // Queues chunks; `written(ok)` runs on an I/O thread once they are on the wire (ok) or the
  // connection failed (not ok). Flow control: write the next only after `written`.
  virtual void Write(std::vector<SharedText> chunks, std::function<void(bool ok)> written) = 0;
  virtual void End() = 0;
  // Whether the connection has gone (a write failed, the server stops): nothing will be sent.
  virtual bool closed() const = 0;
  // Runs once when the exchange ends: answered and written, or its connection gone.
  virtual void OnDone(std::function<void()> done) = 0;
};
using HttpExchangePtr = std::shared_ptr<HttpExchange>;

using HttpHandler = std::function<void(HttpRequest& request, const HttpExchangePtr& exchange)>;

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;  // 0: a free one
  int io_threads = 2;
  // Threads of each lane (lane 0 is the routes' default).
  std::vector<int> lanes = {4};
  std::size_t max_body_bytes = 1 << 20;
  std::size_t max_header_bytes = 64 << 10;
  // Open connections at most; one more is closed at once (counted in refused_connections). 0:
  // from the process's file limit (raised to its hard limit), less a reserve for the store and
  // the rest.
  std::size_t max_connections = 0;
  // A keep-alive connection idle this long is closed; so is one that takes this long to send a
  // request once started.
  std::chrono::milliseconds idle_timeout{60'000};
  // A response (or a stream's chunk) that cannot be written within this closes its connection.
  std::chrono::milliseconds write_timeout{30'000};
  // TLS: certificate and key files (PEM); with `client_ca`, clients must show a certificate it
  // signs. Empty: plain HTTP.
  std::string tls_cert, tls_key, tls_client_ca;
  // The body of the server's own refusals: 400 (malformed request), 404 (no route), 413 (body
  // too large), 431 (headers too large), 500 (a handler that never answered), 503 (at the
  // connection limit). `what` says which.
  std::function<HttpResponse(int status, std::string_view what)> error_response;
};

// Counters, for metrics.
struct HttpServerStats {
  std::uint64_t connections_open = 0;
  std::uint64_t connections_accepted = 0;
  std::uint64_t connections_refused = 0;  // at the connection limit
  std::uint64_t requests = 0;
};

class HttpServer {
 public:
  // A route's lane: an index into HttpServerOptions::lanes, or kInline.
  static constexpr int kInline = -1;

  explicit HttpServer(HttpServerOptions options);
  ~HttpServer();  // stops
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // A route: `method` and a path pattern of '/'-separated segments, each a literal, "*" (any
  // segment, captured), "#" (digits, captured) or "a|b|c" (one of them, captured), and the lane
  // its handler runs on. Routes are tried in the order given. Before Listen only.
  void Route(std::string method, std::string pattern, HttpHandler handler, int lane = 0);

  // Binds and listens (errors name the address: in use, not this machine's; TLS files that
  // cannot be used), then starts the threads. port() is the bound port afterwards.
  Status Listen();
  int port() const;
  // Stops accepting, closes every connection and joins the threads. Idempotent.
  void Stop();

  // Runs `fn` on a thread of `lane`.
  void Post(std::function<void()> fn, int lane = 0);
  // Runs `fn` on an I/O thread after `delay`, unless the returned timer is cancelled first (or
  // the server stops). Cancel is idempotent and may race with the firing: `fn` runs at most once.
  class Timer {
   public:
    virtual ~Timer() = default;
    virtual void Cancel() = 0;
  };
  std::shared_ptr<Timer> After(std::chrono::milliseconds delay, std::function<void()> fn);

  HttpServerStats stats() const;
  // The file limit in force after Listen raised it, and the connection limit taken from it.
  std::size_t max_connections() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Raises the process's open-file limit to its hard limit; returns the soft limit in force.
std::size_t RaiseFileLimit();

}  // namespace arbiter::net
