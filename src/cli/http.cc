// Plain HTTP/1.1 for the commands that talk to the server: one request on a connection of its own.
// Nothing here is initialised before a command sends its request (no TLS library, no regular
// expression, no name service for a numeric address).
#include "cli/http.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>

namespace arbiter::cli {
namespace {

// A socket closed when it goes out of scope.
class Socket {
 public:
  explicit Socket(int fd) : fd_(fd) {}
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket() {
    if (fd_ >= 0) ::close(fd_);
  }
  int fd() const { return fd_; }

 private:
  int fd_;
};

int Millis(std::chrono::seconds s) {
  return static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(s).count());
}

// Connects to `address` within `timeout_ms`; true when connected.
bool ConnectWithin(int fd, const sockaddr* address, socklen_t length, int timeout_ms) {
  const int flags = ::fcntl(fd, F_GETFL, 0);
  ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  int rc = ::connect(fd, address, length);
  if (rc < 0 && errno == EINPROGRESS) {
    pollfd p{fd, POLLOUT, 0};
    rc = -1;
    if (::poll(&p, 1, timeout_ms) == 1) {
      int error = 0;
      socklen_t size = sizeof error;
      if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size) == 0 && error == 0) rc = 0;
    }
  }
  ::fcntl(fd, F_SETFL, flags);
  return rc == 0;
}

// Connects to `host`:`port`: a numeric address directly, a name through getaddrinfo (each of its
// addresses in turn). Returns the socket, or -1.
int Connect(const std::string& host, int port, int timeout_ms) {
  auto attempt = [timeout_ms](int family, const sockaddr* address, socklen_t length) {
    const int fd = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC, IPPROTO_TCP);
    if (fd < 0) return -1;
    if (ConnectWithin(fd, address, length, timeout_ms)) return fd;
    ::close(fd);
    return -1;
  };
  sockaddr_in v4{};
  if (::inet_pton(AF_INET, host.c_str(), &v4.sin_addr) == 1) {
    v4.sin_family = AF_INET;
    v4.sin_port = htons(static_cast<std::uint16_t>(port));
    return attempt(AF_INET, reinterpret_cast<const sockaddr*>(&v4), sizeof v4);
  }
  sockaddr_in6 v6{};
  if (::inet_pton(AF_INET6, host.c_str(), &v6.sin6_addr) == 1) {
    v6.sin6_family = AF_INET6;
    v6.sin6_port = htons(static_cast<std::uint16_t>(port));
    return attempt(AF_INET6, reinterpret_cast<const sockaddr*>(&v6), sizeof v6);
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) return -1;
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next)
    fd = attempt(a->ai_family, a->ai_addr, a->ai_addrlen);
  ::freeaddrinfo(found);
  return fd;
}

bool SendAll(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

// Appends what the connection has next to `in`, waiting at most `timeout_ms`. 0: the end of the
// connection; -1: an error or the timeout.
ssize_t Receive(int fd, std::string& in, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  int ready = 0;
  do {
    ready = ::poll(&p, 1, timeout_ms);
  } while (ready < 0 && errno == EINTR);
  if (ready != 1) return -1;
  char buffer[16384];
  ssize_t n = 0;
  do {
    n = ::recv(fd, buffer, sizeof buffer, 0);
  } while (n < 0 && errno == EINTR);
  if (n > 0) in.append(buffer, static_cast<std::size_t>(n));
  return n;
}

bool EqualsIgnoringCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  }
  return true;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

// Decodes a chunked body from `in` starting at `at` into `body`. Returns false while incomplete;
// sets `bad` when it cannot be read.
bool Dechunk(const std::string& in, std::size_t at, std::string& body, bool& bad) {
  body.clear();
  while (true) {
    const std::size_t eol = in.find("\r\n", at);
    if (eol == std::string::npos) return false;
    std::string_view size_text = std::string_view(in).substr(at, eol - at);
    size_text = size_text.substr(0, size_text.find(';'));
    size_text = Trim(size_text);
    std::size_t size = 0;
    auto [end, ec] =
        std::from_chars(size_text.data(), size_text.data() + size_text.size(), size, 16);
    if (size_text.empty() || ec != std::errc() || end != size_text.data() + size_text.size()) {
      bad = true;
      return false;
    }
    at = eol + 2;
    if (size == 0) return in.find("\r\n", at) != std::string::npos;  // trailers, then the end
    if (in.size() < at + size + 2) return false;
    body.append(in, at, size);
    at += size + 2;
  }
}

}  // namespace

std::string EncodeQueryParam(std::string_view value) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (char c : value) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) || std::strchr("-_.!~*'()", c) != nullptr) {
      out += c;
    } else {
      out += '%';
      out += kHex[u >> 4];
      out += kHex[u & 15];
    }
  }
  return out;
}

HttpAnswer SendPlainHttp(const std::string& server, const HttpRequest& request) {
  HttpAnswer answer;
  // http://HOST[:PORT], HOST a name, an IPv4 address or [IPv6].
  std::string_view rest = std::string_view(server).substr(server.find("://") + 3);
  std::string host;
  int port = 80;
  std::string_view port_text;
  if (!rest.empty() && rest.front() == '[') {
    const std::size_t close = rest.find(']');
    host = std::string(rest.substr(1, close == std::string_view::npos ? close : close - 1));
    rest = close == std::string_view::npos ? std::string_view() : rest.substr(close + 1);
    if (!rest.empty() && rest.front() == ':') port_text = rest.substr(1);
  } else {
    const std::size_t colon = rest.find(':');
    host = std::string(rest.substr(0, colon));
    if (colon != std::string_view::npos) port_text = rest.substr(colon + 1);
  }
  if (!port_text.empty()) {
    auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (ec != std::errc() || end != port_text.data() + port_text.size() || port <= 0 ||
        port > 65535) {
      answer.error = "Connection";
      return answer;
    }
  }
  const Socket socket(Connect(host, port, Millis(request.connect_timeout)));
  if (socket.fd() < 0) {
    answer.error = "Connection";
    return answer;
  }
  const int one = 1;
  ::setsockopt(socket.fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);

  const bool has_body =
      request.method == "POST" || request.method == "PUT" || request.method == "PATCH";
  std::string out = request.method + " " + request.path + " HTTP/1.1\r\nHost: ";
  out += host.find(':') != std::string::npos ? "[" + host + "]" : host;
  if (port != 80) out += ":" + std::to_string(port);
  out += "\r\nAccept: */*\r\nUser-Agent: arbiter\r\nConnection: close\r\n";
  for (const auto& [name, value] : request.headers) out += name + ": " + value + "\r\n";
  if (has_body) {
    out += "Content-Type: application/json\r\nContent-Length: ";
    out += std::to_string(request.body.size()) + "\r\n\r\n";
    out += request.body;
  } else {
    out += "\r\n";
  }
  if (!SendAll(socket.fd(), out)) {
    answer.error = "Write";
    return answer;
  }

  // The status line and headers, then the body by its length, chunked, or to the end.
  const int timeout_ms = Millis(request.read_timeout);
  std::string in;
  std::size_t header_end = std::string::npos;
  while ((header_end = in.find("\r\n\r\n")) == std::string::npos) {
    if (Receive(socket.fd(), in, timeout_ms) <= 0) {
      answer.error = "Read";
      return answer;
    }
  }
  const std::string_view head = std::string_view(in).substr(0, header_end);
  // "HTTP/1.1 201 Created"
  const std::size_t space = head.find(' ');
  if (head.rfind("HTTP/", 0) != 0 || space == std::string_view::npos) {
    answer.error = "Read";
    return answer;
  }
  {
    const std::string_view code = head.substr(space + 1, 3);
    auto [end, ec] = std::from_chars(code.data(), code.data() + code.size(), answer.status);
    if (ec != std::errc() || end != code.data() + code.size()) {
      answer.error = "Read";
      answer.status = 0;
      return answer;
    }
  }
  bool chunked = false;
  std::optional<std::size_t> length;
  for (std::size_t at = head.find("\r\n"); at != std::string_view::npos;) {
    const std::size_t next = head.find("\r\n", at + 2);
    const std::string_view line = head.substr(
        at + 2, next == std::string_view::npos ? std::string_view::npos : next - at - 2);
    at = next;
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string_view name = Trim(line.substr(0, colon));
    const std::string_view value = Trim(line.substr(colon + 1));
    if (EqualsIgnoringCase(name, "Content-Length")) {
      std::size_t n = 0;
      auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
      if (ec == std::errc() && end == value.data() + value.size()) length = n;
    } else if (EqualsIgnoringCase(name, "Transfer-Encoding")) {
      chunked = value.find("chunked") != std::string_view::npos;
    } else if (EqualsIgnoringCase(name, "Location")) {
      answer.location = std::string(value);
    } else if (EqualsIgnoringCase(name, "Retry-After")) {
      answer.retry_after = std::string(value);
    }
  }
  const std::size_t body_at = header_end + 4;
  const bool no_body = request.method == "HEAD" || answer.status == 204 || answer.status == 304 ||
                       answer.status / 100 == 1;
  while (!no_body) {
    if (chunked) {
      bool bad = false;
      if (Dechunk(in, body_at, answer.body, bad)) break;
      if (bad) {
        answer.error = "Read";
        answer.status = 0;
        return answer;
      }
    } else if (length && in.size() - body_at >= *length) {
      answer.body = in.substr(body_at, *length);
      break;
    }
    const ssize_t n = Receive(socket.fd(), in, timeout_ms);
    if (n == 0 && !chunked && !length) {
      answer.body = in.substr(body_at);
      break;
    }
    if (n <= 0) {
      answer.error = "Read";
      answer.status = 0;
      return answer;
    }
  }
  return answer;
}

}  // namespace arbiter::cli
