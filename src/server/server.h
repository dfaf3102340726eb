// `arbiter server`: the long-lived control plane. The HTTP/JSON API of docs/api.md over the
// server's core (server/core.h).
#pragma once

#include <string>

namespace arbiter::server {

struct ServerArgs {
  std::string config;                    // the cluster file
  std::string data = "arbiter-data";     // the store's directory
  std::string listen = "127.0.0.1:8642"; // HOST:PORT; port 0 picks a free one
  bool virtual_nodes = false;
  int threads = 64;  // connection threads (a keep-alive connection holds one)
};

// Runs until SIGINT or SIGTERM. Prints `listening on http://HOST:PORT` once the port is bound
// (then recovers; /readyz answers 200 once recovery is done) and `ready` after recovery.
// Returns the exit status: 0 after a signal, 1 when the configuration or the store cannot be
// used, 2 on a bad --listen.
int RunServer(const ServerArgs& args);

}  // namespace arbiter::server
