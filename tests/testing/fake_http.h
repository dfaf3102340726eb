// A stand-in HTTP server for the tests of clients: it listens on a free loopback port, reads each
// request whole (one per connection: it answers with Connection: close) and answers what the
// test's handler says, which may also be to drop the connection without an answer (a server that
// dies mid-request). Requests are handled one at a time, in order, on a thread of its own.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace arbiter::testing {

struct FakeRequest {
  std::string method;
  std::string target;  // the path and query
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;

  std::string Header(const std::string& name) const {
    for (const auto& [k, v] : headers) {
      if (k.size() != name.size()) continue;
      bool same = true;
      for (std::size_t i = 0; i < k.size() && same; ++i)
        same = std::tolower(static_cast<unsigned char>(k[i])) ==
               std::tolower(static_cast<unsigned char>(name[i]));
      if (same) return v;
    }
    return "";
  }
};

struct FakeResponse {
  int status = 200;
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  bool drop = false;  // close the connection without answering
};

class FakeHttpServer {
 public:
  using Handler = std::function<FakeResponse(const FakeRequest&)>;

  explicit FakeHttpServer(Handler handler) : handler_(std::move(handler)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::listen(fd_, 64);
    socklen_t size = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &size);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~FakeHttpServer() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
  }
  FakeHttpServer(const FakeHttpServer&) = delete;
  FakeHttpServer& operator=(const FakeHttpServer&) = delete;

  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  // Every request so far, in order.
  std::vector<FakeRequest> requests() const {
    std::lock_guard lock(mu_);
    return requests_;
  }

  // A loopback port nothing listens on (bound, then closed).
  static int ClosedPort() {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    socklen_t size = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &size);
    ::close(fd);
    return ntohs(a.sin_port);
  }

 private:
  void Serve() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) != 1) continue;
      const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      FakeRequest request;
      if (Read(c, request)) {
        {
          std::lock_guard lock(mu_);
          requests_.push_back(request);
        }
        const FakeResponse response = handler_(request);
        if (!response.drop) Write(c, response);
      }
      ::close(c);
    }
  }

  bool Read(int c, FakeRequest& request) {
    std::string in;
    std::size_t end = std::string::npos;
    char buffer[8192];
    while ((end = in.find("\r\n\r\n")) == std::string::npos) {
      if (!Receive(c, in, buffer, sizeof buffer)) return false;
    }
    const std::string head = in.substr(0, end);
    std::size_t line_end = head.find("\r\n");
    const std::string first = head.substr(0, line_end);
    const std::size_t s1 = first.find(' '), s2 = first.find(' ', s1 + 1);
    request.method = first.substr(0, s1);
    request.target = first.substr(s1 + 1, s2 - s1 - 1);
    std::size_t length = 0;
    while (line_end != std::string::npos) {
      const std::size_t next = head.find("\r\n", line_end + 2);
      const std::string line = head.substr(
          line_end + 2, next == std::string::npos ? std::string::npos : next - line_end - 2);
      line_end = next;
      const std::size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string value = line.substr(colon + 1);
      while (!value.empty() && value.front() == ' ') value.erase(0, 1);
      request.headers.emplace_back(line.substr(0, colon), value);
    }
    const std::string cl = request.Header("Content-Length");
    if (!cl.empty()) length = std::stoul(cl);
    while (in.size() < end + 4 + length) {
      if (!Receive(c, in, buffer, sizeof buffer)) return false;
    }
    request.body = in.substr(end + 4, length);
    return true;
  }

  static bool Receive(int c, std::string& in, char* buffer, std::size_t size) {
    pollfd p{c, POLLIN, 0};
    if (::poll(&p, 1, 10000) != 1) return false;
    const ssize_t n = ::recv(c, buffer, size, 0);
    if (n <= 0) return false;
    in.append(buffer, static_cast<std::size_t>(n));
    return true;
  }

  static void Write(int c, const FakeResponse& r) {
    std::string out = "HTTP/1.1 " + std::to_string(r.status) + " Fake\r\n";
    for (const auto& [k, v] : r.headers) out += k + ": " + v + "\r\n";
    out += "Content-Type: application/json\r\nConnection: close\r\nContent-Length: " +
           std::to_string(r.body.size()) + "\r\n\r\n" + r.body;
    std::string_view left = out;
    while (!left.empty()) {
      const ssize_t n = ::send(c, left.data(), left.size(), MSG_NOSIGNAL);
      if (n <= 0) return;
      left.remove_prefix(static_cast<std::size_t>(n));
    }
  }

  Handler handler_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  mutable std::mutex mu_;
  std::vector<FakeRequest> requests_;
  std::thread thread_;
};

// No answer: the connection is closed (a server that died mid-request).
inline FakeResponse DropConnection() {
  FakeResponse r;
  r.drop = true;
  return r;
}

// A standby's answers (docs/api.md, "Several servers"): a redirect to `leader` with the same path
// and query, or, while no leader is known (`leader` empty), 503 with Retry-After.
inline FakeResponse StandbyAnswer(const FakeRequest& request, const std::string& leader) {
  FakeResponse r;
  const std::string message = leader.empty() ? "standby: no server leads yet; retry shortly"
                                             : "standby: the leader is " + leader;
  r.body = R"({"error": {"code": "unavailable", "field": "", "message": ")" + message +
           R"("}, "leader": ")" + leader + R"("})";
  if (leader.empty()) {
    r.status = 503;
    r.headers.emplace_back("Retry-After", "1");
  } else {
    r.status = 307;
    r.headers.emplace_back("Location", leader + request.target);
  }
  return r;
}

}  // namespace arbiter::testing
