#include "loadgen/http_client.h"

#include <boost/asio/error.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <utility>

namespace arbiter::loadgen {

std::string ErrorKind(const boost::system::error_code& ec) {
  if (ec == beast::error::timeout) return "timeout";
  if (ec == asio::error::connection_refused) return "refused";
  if (ec == asio::error::eof || ec == http::error::end_of_stream ||
      ec == asio::error::connection_reset || ec == asio::error::broken_pipe ||
      ec == http::error::partial_message)
    return "closed";
  if (ec == asio::error::no_descriptors) return "no_descriptors";
  if (ec == asio::error::operation_aborted) return "aborted";
  if (ec == boost::system::errc::address_not_available || ec == asio::error::address_in_use)
    return "no_ports";
  return "other";
}

Connection::Connection(asio::any_io_executor executor, Tcp::endpoint server)
    : server_(std::move(server)),
      host_(server_.address().to_string() + ":" + std::to_string(server_.port())),
      stream_(std::move(executor)) {}

void Connection::Close() {
  boost::system::error_code ignored;
  // An abortive close (RST): no TIME_WAIT on this side. Thousands of agents reconnecting after
  // timeouts otherwise leave tens of thousands of TIME_WAIT sockets from one address to one port,
  // and the kernel's search for a free source port in connect() took the loop's thread for
  // seconds (perf: __inet_hash_connect, __inet_check_established).
  stream_.socket().set_option(asio::socket_base::linger(true, 0), ignored);
  stream_.close();
  buffer_.clear();
  open_ = false;
}

asio::awaitable<std::string> Connection::Connect(std::chrono::milliseconds timeout) {
  if (open_) co_return "";
  stream_.expires_after(timeout);
  auto [ec] = co_await stream_.async_connect(server_, kAwait);
  if (ec) {
    stream_.close();
    co_return ec == beast::error::timeout ? "connect_timeout" : "connect_" + ErrorKind(ec);
  }
  boost::system::error_code ignored;
  stream_.socket().set_option(Tcp::no_delay(true), ignored);
  open_ = true;
  co_return "";
}

asio::awaitable<Reply> Connection::Call(http::verb method, std::string_view target,
                                        std::string_view token, std::string body,
                                        std::chrono::milliseconds timeout) {
  http::request<http::string_body> request{method, target, 11};
  request.set(http::field::host, host_);
  if (!token.empty()) request.set(http::field::authorization, "Bearer " + std::string(token));
  if (method == http::verb::post || !body.empty()) {
    request.set(http::field::content_type, "application/json");
    request.body() = std::move(body);
  }
  request.keep_alive(true);
  request.prepare_payload();
  for (int attempt = 0;; ++attempt) {
    const bool reused = open_;
    if (std::string error = co_await Connect(timeout); !error.empty())
      co_return Reply{0, "", error};
    stream_.expires_after(timeout);
    auto [write_error, written] = co_await http::async_write(stream_, request, kAwait);
    http::response_parser<http::string_body> parser;
    parser.body_limit(64 << 20);
    boost::system::error_code error = write_error;
    if (!error)
      std::tie(error, written) = co_await http::async_read(stream_, buffer_, parser, kAwait);
    if (error) {
      Close();
      // The server closes a keep-alive connection idle for a while: open it again, once.
      if (reused && attempt == 0 && ErrorKind(error) == "closed") continue;
      co_return Reply{0, "", ErrorKind(error)};
    }
    http::response<http::string_body>& answer = parser.get();
    if (!answer.keep_alive()) Close();
    co_return Reply{static_cast<int>(answer.result_int()), std::move(answer.body()), ""};
  }
}

}  // namespace arbiter::loadgen
