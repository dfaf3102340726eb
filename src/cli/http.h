// How the commands that talk to the server send a request: plain HTTP on a socket of their own
// (http.cc: no library to load or initialise, so that `arbiter submit` starts in well under a
// millisecond), HTTPS with cpp-httplib and OpenSSL (https.cc, only in the whole program,
// `arbiter-full`; the front, front.cc, runs that program for an https server).
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace arbiter::cli {

struct HttpRequest {
  std::string method;  // GET, POST, PUT, PATCH or DELETE
  std::string path;    // with its query
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;  // POST, PUT and PATCH send it (maybe empty) as application/json
  std::chrono::seconds connect_timeout{5};
  std::chrono::seconds read_timeout{90};
  // The answer may take long by design (a long poll): its read timeout stays whole, where another
  // request's is cut to what is left of the failover timeout (client.cc, Send).
  bool long_by_design = false;
};

struct HttpAnswer {
  int status = 0;  // 0: no answer, `error` says why
  std::string body;
  std::string location;     // the Location header (a redirect's), when there is one
  std::string retry_after;  // the Retry-After header, when there is one
  std::string error;        // cpp-httplib's name of the failure: "Connection", "Read", "Write", ...
};

// One request to `server` ("http://HOST[:PORT]", HOST a name, an IPv4 address or [IPv6]) on a
// connection of its own (Connection: close). The body of the answer is read whole, by its
// Content-Length, chunked, or up to the end of the connection.
HttpAnswer SendPlainHttp(const std::string& server, const HttpRequest& request);

// One request to an https server, verifying its certificate against `ca_file` (empty: the
// system's CAs) with cpp-httplib (src/net/tls.h). Defined by https.cc in the whole program; the
// front never calls it (it runs the whole program for an https server).
HttpAnswer SendHttps(const std::string& server, const std::string& ca_file,
                     const HttpRequest& request);

// A query parameter's value, percent-encoded as cpp-httplib's encode_query_param does.
std::string EncodeQueryParam(std::string_view value);

}  // namespace arbiter::cli
