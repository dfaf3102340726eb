// A TCP proxy on loopback in front of a unix socket (the tests' PostgreSQL), which a test can
// make fail the ways a network path or a connection pooler fails:
// - Hang(): bytes stop being forwarded in both directions, while every connection stays open and
//   new ones are still accepted. The kernel still acknowledges what is sent to the proxy, so a
//   client sees no TCP error at all: only silence (a pooler or proxy that stops forwarding).
// - Resume(): forwarding goes on where it stopped.
// - DropAll(): every connection is closed at once (a proxy restart, a reset network path).
// One thread of its own, poll(2) over every socket; stopped and joined by the destructor.
#pragma once

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace arbiter::testing {

class FaultProxy {
 public:
  // Listens on 127.0.0.1:`port` (0: a free one) and forwards each connection to the unix socket
  // `target`.
  explicit FaultProxy(std::string target, int port = 0);
  ~FaultProxy();
  FaultProxy(const FaultProxy&) = delete;
  FaultProxy& operator=(const FaultProxy&) = delete;

  int port() const { return port_; }
  void Hang();
  void Resume();
  void DropAll();
  // Connections open now.
  int connections() const;

 private:
  struct Pipe {
    int client = -1;
    int server = -1;
    std::string to_server, to_client;  // read, not yet written
  };
  void Loop();

  std::string target_;
  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};  // a pipe that wakes the loop
  int port_ = 0;
  std::atomic<bool> hung_{false};
  std::atomic<bool> drop_{false};
  std::atomic<bool> stop_{false};
  mutable std::mutex mu_;
  std::vector<Pipe> pipes_;  // GUARDED_BY(mu_) for connections(); the loop's own otherwise
  std::thread thread_;
};

}  // namespace arbiter::testing
