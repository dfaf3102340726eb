#include "testing/fault_proxy.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace arbiter::testing {
namespace {

[[noreturn]] void Die(const char* what) {
  std::fprintf(stderr, "fault proxy: %s: %s\n", what, std::strerror(errno));
  std::abort();
}

void NonBlocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

int ConnectUnix(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::snprintf(a.sun_path, sizeof a.sun_path, "%s", path.c_str());
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  NonBlocking(fd);
  return fd;
}

// Reads what `from` has into `into`; false when `from` closed or failed.
bool Pull(int from, std::string& into) {
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(from, buf, sizeof buf);
    if (n > 0) {
      into.append(buf, static_cast<std::size_t>(n));
      if (into.size() > (8u << 20)) return true;  // enough buffered for now
      continue;
    }
    if (n == 0) return false;
    return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
  }
}

// Writes what it can of `from` to `to`; false when `to` failed.
bool Push(std::string& from, int to) {
  while (!from.empty()) {
    const ssize_t n = ::send(to, from.data(), from.size(), MSG_NOSIGNAL);
    if (n > 0) {
      from.erase(0, static_cast<std::size_t>(n));
      continue;
    }
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR);
  }
  return true;
}

}  // namespace

FaultProxy::FaultProxy(std::string target, int port) : target_(std::move(target)) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  if (listen_fd_ < 0) Die("socket");
  const int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  socklen_t n = sizeof a;
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::listen(listen_fd_, 64) != 0 ||
      ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &n) != 0) {
    Die("listen");
  }
  port_ = ntohs(a.sin_port);
  NonBlocking(listen_fd_);
  if (::pipe(wake_) != 0) Die("pipe");
  NonBlocking(wake_[0]);
  thread_ = std::thread([this] { Loop(); });
}

FaultProxy::~FaultProxy() {
  stop_ = true;
  const char c = 's';
  (void)!::write(wake_[1], &c, 1);
  thread_.join();
  for (Pipe& p : pipes_) {
    ::close(p.client);
    ::close(p.server);
  }
  ::close(listen_fd_);
  ::close(wake_[0]);
  ::close(wake_[1]);
}

void FaultProxy::Hang() {
  hung_ = true;
  const char c = 'h';
  (void)!::write(wake_[1], &c, 1);
}

void FaultProxy::Resume() {
  hung_ = false;
  const char c = 'r';
  (void)!::write(wake_[1], &c, 1);
}

void FaultProxy::DropAll() {
  drop_ = true;
  const char c = 'd';
  (void)!::write(wake_[1], &c, 1);
}

int FaultProxy::connections() const {
  std::lock_guard lock(mu_);
  return static_cast<int>(pipes_.size());
}

void FaultProxy::Loop() {
  std::vector<pollfd> fds;
  while (!stop_) {
    if (drop_.exchange(false)) {
      std::lock_guard lock(mu_);
      for (Pipe& p : pipes_) {
        ::close(p.client);
        ::close(p.server);
      }
      pipes_.clear();
    }
    const bool hung = hung_;
    fds.clear();
    fds.push_back({wake_[0], POLLIN, 0});
    fds.push_back({listen_fd_, POLLIN, 0});
    for (const Pipe& p : pipes_) {
      // Hung: nothing is read (the kernel's buffers fill and still acknowledge) or written.
      const short c =
          static_cast<short>((hung ? 0 : POLLIN) | (!hung && !p.to_client.empty() ? POLLOUT : 0));
      const short s =
          static_cast<short>((hung ? 0 : POLLIN) | (!hung && !p.to_server.empty() ? POLLOUT : 0));
      fds.push_back({p.client, c, 0});
      fds.push_back({p.server, s, 0});
    }
    if (::poll(fds.data(), fds.size(), 200) < 0 && errno != EINTR) Die("poll");
    if (fds[0].revents & POLLIN) {
      char buf[64];
      while (::read(wake_[0], buf, sizeof buf) > 0) {
      }
    }
    if (fds[1].revents & POLLIN) {
      for (;;) {
        const int c = ::accept(listen_fd_, nullptr, nullptr);
        if (c < 0) break;
        NonBlocking(c);
        const int s = ConnectUnix(target_);
        if (s < 0) {
          ::close(c);
          continue;
        }
        std::lock_guard lock(mu_);
        pipes_.push_back({c, s, {}, {}});
      }
    }
    if (hung) continue;
    std::vector<std::size_t> dead;
    const std::size_t polled = (fds.size() - 2) / 2;
    for (std::size_t i = 0; i < polled && i < pipes_.size(); ++i) {
      Pipe& p = pipes_[i];
      const short rc = fds[2 + 2 * i].revents;
      const short rs = fds[3 + 2 * i].revents;
      bool ok = true;
      if (rc & (POLLIN | POLLHUP | POLLERR)) ok = Pull(p.client, p.to_server) && ok;
      if (rs & (POLLIN | POLLHUP | POLLERR)) ok = Pull(p.server, p.to_client) && ok;
      ok = Push(p.to_server, p.server) && ok;
      ok = Push(p.to_client, p.client) && ok;
      if (!ok) dead.push_back(i);
    }
    if (!dead.empty()) {
      std::lock_guard lock(mu_);
      for (auto it = dead.rbegin(); it != dead.rend(); ++it) {
        ::close(pipes_[*it].client);
        ::close(pipes_[*it].server);
        pipes_.erase(pipes_.begin() + static_cast<std::ptrdiff_t>(*it));
      }
    }
  }
}

}  // namespace arbiter::testing
