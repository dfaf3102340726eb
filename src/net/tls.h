// TLS for the clients of the control plane (the CLI, the agents, the server asking an agent's log
// server), over cpp-httplib built with OpenSSL: one way to make a client for an "http://" or
// "https://" address, verifying the server's certificate against a CA file, with an optional
// client certificate (docs/security.md).
#pragma once

#include <httplib.h>

#include <memory>
#include <string>

namespace arbiter::net {

struct TlsClientSettings {
  std::string ca_file;    // CA certificates (PEM) that sign the servers'; empty: the system's
  std::string cert_file;  // a client certificate (PEM), when the server asks for one
  std::string key_file;   // its private key

  // A client for `url` ("http://HOST:PORT" or "https://HOST:PORT"): an https one verifies the
  // server's certificate and host name, and shows the client certificate when there is one.
  std::unique_ptr<httplib::Client> Client(const std::string& url) const {
    auto client = cert_file.empty() ? std::make_unique<httplib::Client>(url)
                                    : std::make_unique<httplib::Client>(url, cert_file, key_file);
    Configure(*client);
    return client;
  }

  void Configure(httplib::Client& client) const {
    if (!ca_file.empty()) client.set_ca_cert_path(ca_file);
    client.enable_server_certificate_verification(true);
  }
};

// Whether `host` is a loopback address or name, where plain HTTP stays on the machine.
inline bool IsLoopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host == "[::1]" || host.rfind("127.", 0) == 0;
}

}  // namespace arbiter::net
