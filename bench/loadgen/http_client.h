// One keep-alive HTTP/1.1 connection to the server (Boost.Beast over Asio, C++20 coroutines):
// each simulated agent, watcher and submitter has its own, as real clients do.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/verb.hpp>
#include <chrono>
#include <string>
#include <string_view>

namespace arbiter::loadgen {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using Tcp = asio::ip::tcp;

// Completion token of every asynchronous call here: errors come back as values, not exceptions.
inline constexpr auto kAwait = asio::as_tuple(asio::use_awaitable);

// An answer, or why none came.
struct Reply {
  int status = 0;     // the HTTP status; 0 when no answer came
  std::string body;   // the answer's body
  std::string error;  // without an answer: "connect", "timeout", "closed", "refused", ...
};

// A short name for a transport error (error counts are keyed by it).
std::string ErrorKind(const boost::system::error_code& ec);

class Connection {
 public:
  Connection(asio::any_io_executor executor, Tcp::endpoint server);

  // Sends one request (a body is JSON) and reads the whole answer, within `timeout`. Connects
  // first when the connection is closed; a kept-alive connection the server closed meanwhile is
  // opened again and the request sent once more.
  asio::awaitable<Reply> Call(http::verb method, std::string_view target, std::string_view token,
                              std::string body, std::chrono::milliseconds timeout);

  // Connects (within `timeout`) if not connected; "" or the error's kind.
  asio::awaitable<std::string> Connect(std::chrono::milliseconds timeout);
  void Close();
  bool open() const { return open_; }

  // For a streamed answer (server-sent events), read by the caller.
  beast::tcp_stream& stream() { return stream_; }
  beast::flat_buffer& buffer() { return buffer_; }
  const std::string& host() const { return host_; }

 private:
  Tcp::endpoint server_;
  std::string host_;  // the Host header: HOST:PORT
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  bool open_ = false;
};

}  // namespace arbiter::loadgen
