// HTTPS for the commands that talk to the server: cpp-httplib with OpenSSL, verifying the server's
// certificate (src/net/tls.h). Only in the whole program (`arbiter-full`): the front (front.cc)
// runs it for an https server, so that plain HTTP loads no TLS library.
#include <httplib.h>

#include "cli/http.h"
#include "net/tls.h"

namespace arbiter::cli {

HttpAnswer SendHttps(const std::string& server, const std::string& ca_file,
                     const HttpRequest& request) {
  net::TlsClientSettings tls;
  tls.ca_file = ca_file;
  const std::unique_ptr<httplib::Client> connection = tls.Client(server);
  httplib::Client& client = *connection;
  client.set_connection_timeout(request.connect_timeout);
  client.set_read_timeout(request.read_timeout);
  httplib::Headers headers(request.headers.begin(), request.headers.end());
  const std::string& m = request.method;
  const std::string& text = request.body;
  httplib::Result res = m == "GET"      ? client.Get(request.path, headers)
                        : m == "DELETE" ? client.Delete(request.path, headers)
                        : m == "PUT" ? client.Put(request.path, headers, text, "application/json")
                        : m == "PATCH"
                            ? client.Patch(request.path, headers, text, "application/json")
                            : client.Post(request.path, headers, text, "application/json");
  HttpAnswer answer;
  if (!res) {
    answer.error = httplib::to_string(res.error());
    return answer;
  }
  answer.status = res->status;
  answer.body = std::move(res->body);
  answer.location = res->get_header_value("Location");
  answer.retry_after = res->get_header_value("Retry-After");
  return answer;
}

}  // namespace arbiter::cli
