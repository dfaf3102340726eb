// `arbiter server`: the long-lived control plane. The HTTP/JSON API of docs/api.md over the
// server's core (server/core.h).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "arbiter/quantity.h"
#include "arbiter/status.h"

namespace arbiter::server {

struct ServerArgs {
  std::string config;                     // the cluster file
  std::string data = "arbiter-data";      // the store's directory
  std::string listen = "127.0.0.1:8642";  // HOST:PORT; port 0 picks a free one
  bool virtual_nodes = false;
  // Check every cycle's plan (CoreOptions::check_invariants): for tests.
  bool check_invariants = false;
  // Threads that run the API's handlers (0: processors + 2). Connections hold none: any number
  // are served by a thread per processor (docs/design/server.md).
  int threads = 0;
  // TLS: the server's certificate and key (PEM); with `tls_client_ca`, clients must show a
  // certificate it signs (agents, say). Without a certificate the server speaks plain HTTP, on a
  // loopback address only unless `insecure_http`.
  std::string tls_cert, tls_key, tls_client_ca;
  // The CA file that signs the agents' log servers' certificates (https log servers).
  std::string agent_ca;
  bool insecure_http = false;
  // Development mode: tokens written in the configuration itself (`token:`) are taken.
  bool dev = false;
  // The store: empty for SQLite under `data`; a PostgreSQL connection string (postgresql://...)
  // for a store several servers share, one leading and the others standing by
  // (docs/design/ha.md).
  std::string store;
  // With PostgreSQL: where clients reach this server (http://HOST:PORT), which standbys name
  // when they send requests to the leader. Default: the scheme and --listen, with this machine's
  // host name for a wildcard address.
  std::string advertise;
  // With PostgreSQL: a leader that has not renewed its lease for this long (by the database's
  // clock) is deposed. It renews every fifth of it; standbys try to lead 4 times a second.
  Millis lease_ms = 5000;
  // Called (once, from another thread) when this server lost the leadership it held: it has
  // stopped scheduling and writing, and its process should exit (RunServer exits with 3).
  std::function<void(const Status& why)> lost;
};

// A running server: the event-driven HTTP server, the scheduling loop, the store. Stops when
// destroyed.
class Server {
 public:
  // Loads the configuration, binds the port, starts serving (/healthz answers; the API and
  // /readyz answer 503 until recovery is done), calls `listening(port)`, opens the store and
  // recovers. Errors name the file, the flag or the stored job.
  static Result<std::unique_ptr<Server>> Start(const ServerArgs& args,
                                               const std::function<void(int port)>& listening = {});
  virtual ~Server() = default;
  virtual int port() const = 0;
  // Reads the configuration file's `server.tokens` again and serves with them from now on
  // (rotation without a restart; RunServer does it on SIGHUP). Other changes of the file need a
  // restart. Errors (the file does not load, a token written in it without --dev) keep the
  // tokens in use.
  virtual Status ReloadTokens() = 0;
};

// Runs until SIGINT or SIGTERM; SIGHUP reloads the tokens. Prints `listening on http://HOST:PORT`
// once the port is bound (then recovers; /readyz answers 200 once recovery is done) and `ready`
// after recovery. Returns the exit status: 0 after a signal, 1 when the configuration or the store
// cannot be used, 2 on a bad --listen, 3 when it led and lost the leadership (a supervisor restarts
// it, and it comes back as a standby).
int RunServer(const ServerArgs& args);

}  // namespace arbiter::server
