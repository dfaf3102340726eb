#include "server/agent_wire.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <sys/socket.h>

#include <charconv>
#include <limits>
#include <nlohmann/json.hpp>

#include "job/limits.h"
#include "store/codec.h"

namespace arbiter::server {
namespace {

using Json = nlohmann::json;

// At most this many devices and task reports in one body (a node has at most kMaxDevicesPerNode
// devices; a task per device share is far above what any node runs).
constexpr std::size_t kMaxReports = 100000;
constexpr std::size_t kMaxUrlBytes = 2048;

Status Wrong(std::string field, std::string_view expected) {
  return Status::InvalidArgument(fmt::format("must be {}", expected), std::move(field));
}

// The fields of `object` must be among `known`.
Status OnlyFields(const Json& object, std::initializer_list<std::string_view> known,
                  const std::string& prefix) {
  for (const auto& [key, value] : object.items()) {
    bool found = false;
    for (std::string_view k : known) found = found || key == k;
    if (!found) {
      std::string list;
      for (std::string_view k : known) list += (list.empty() ? "" : ", ") + std::string(k);
      const std::string shown =
          limits::CheckName("", key, true).ok() ? key : std::string("(unprintable)");
      return Status::InvalidArgument(fmt::format("unknown field (known: {})", list),
                                     prefix + shown);
    }
  }
  return Status::Ok();
}

Status Integer(const Json& object, const char* key, const std::string& field, std::int64_t min,
               std::int64_t max, std::int64_t& out) {
  if (!object.contains(key)) return Status::Ok();
  const Json& v = object[key];
  if (!v.is_number_integer())
    return Wrong(field, fmt::format("an integer from {} to {}", min, max));
  if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(max))
    return Wrong(field, fmt::format("an integer from {} to {}", min, max));
  const std::int64_t x = v.get<std::int64_t>();
  if (x < min || x > max) return Wrong(field, fmt::format("an integer from {} to {}", min, max));
  out = x;
  return Status::Ok();
}

Status Boolean(const Json& object, const char* key, const std::string& field, bool& out) {
  if (!object.contains(key)) return Status::Ok();
  if (!object[key].is_boolean()) return Wrong(field, "true or false");
  out = object[key].get<bool>();
  return Status::Ok();
}

Status Text(const Json& object, const char* key, const std::string& field, std::size_t max_bytes,
            std::string& out) {
  if (!object.contains(key)) return Status::Ok();
  if (!object[key].is_string()) return Wrong(field, "a string");
  std::string text = object[key].get<std::string>();
  if (Status s = limits::CheckText(field, text, max_bytes); !s.ok()) return s;
  out = std::move(text);
  return Status::Ok();
}

Result<Json> Object(std::string_view text) {
  if (text.empty()) return Status::InvalidArgument("empty; expected a JSON object", "body");
  Result<Json> body = store::ParseJson(text, "body");
  if (!body.ok()) return body;
  if (!body->is_object()) return Status::InvalidArgument("expected a JSON object", "body");
  return body;
}

// An IP address in its canonical text ("::ffff:10.0.0.1" as "10.0.0.1"), or "" when it is none.
std::string CanonicalIp(std::string text) {
  if (text.size() > 2 && text.front() == '[' && text.back() == ']')
    text = text.substr(1, text.size() - 2);
  if (text.rfind("::ffff:", 0) == 0 && text.find('.') != std::string::npos) text = text.substr(7);
  unsigned char buffer[16];
  char out[INET6_ADDRSTRLEN];
  if (inet_pton(AF_INET, text.c_str(), buffer) == 1)
    return inet_ntop(AF_INET, buffer, out, sizeof out) ? out : "";
  if (inet_pton(AF_INET6, text.c_str(), buffer) == 1)
    return inet_ntop(AF_INET6, buffer, out, sizeof out) ? out : "";
  return "";
}

}  // namespace

Result<RegisterBody> ParseRegisterBody(std::string_view text) {
  Result<Json> parsed = Object(text);
  if (!parsed.ok()) return parsed.status();
  const Json& body = *parsed;
  if (Status s = OnlyFields(
          body, {"devices", "cpu_milli", "memory_mib", "hostname", "address", "log_url", "labels"},
          "");
      !s.ok())
    return s;
  RegisterBody out;
  if (body.contains("devices")) {
    const Json& devices = body["devices"];
    if (!devices.is_array()) return Wrong("devices", "an array of objects");
    if (devices.size() > kMaxDevicesPerNode)
      return Wrong("devices", fmt::format("at most {} devices", kMaxDevicesPerNode));
    for (std::size_t i = 0; i < devices.size(); ++i) {
      const Json& d = devices[i];
      const std::string f = fmt::format("devices[{}]", i);
      if (!d.is_object()) return Wrong(f, "an object");
      if (Status s =
              OnlyFields(d, {"model", "name", "memory_mib", "uuid", "nvlink_group"}, f + ".");
          !s.ok())
        return s;
      ReportedDevice r;
      if (Status s = Text(d, "model", f + ".model", limits::kMaxNameBytes, r.model); !s.ok())
        return s;
      if (Status s = Text(d, "name", f + ".name", limits::kMaxNameBytes, r.name); !s.ok()) return s;
      if (Status s = Text(d, "uuid", f + ".uuid", limits::kMaxNameBytes, r.uuid); !s.ok()) return s;
      if (Status s =
              Integer(d, "memory_mib", f + ".memory_mib", 0, limits::kMaxMemoryMiB, r.memory_mib);
          !s.ok())
        return s;
      if (Status s = Integer(d, "nvlink_group", f + ".nvlink_group", -1, kMaxDevicesPerNode,
                             r.nvlink_group);
          !s.ok())
        return s;
      out.devices.push_back(std::move(r));
    }
  }
  if (Status s =
          Integer(body, "cpu_milli", "cpu_milli", 0, limits::kMaxCpuMilliPerTask, out.cpu_milli);
      !s.ok())
    return s;
  if (Status s =
          Integer(body, "memory_mib", "memory_mib", 0, limits::kMaxMemoryMiB, out.memory_mib);
      !s.ok())
    return s;
  if (Status s = Text(body, "hostname", "hostname", limits::kMaxNameBytes, out.hostname); !s.ok())
    return s;
  if (Status s = Text(body, "address", "address", limits::kMaxNameBytes, out.address); !s.ok())
    return s;
  if (Status s = Text(body, "log_url", "log_url", kMaxUrlBytes, out.log_url); !s.ok()) return s;
  if (!out.log_url.empty() && UrlHost(out.log_url).empty())
    return Wrong("log_url", "http://HOST:PORT or https://HOST:PORT");
  if (body.contains("labels")) {
    const Json& labels = body["labels"];
    if (!labels.is_object()) return Wrong("labels", "an object of strings");
    if (labels.size() > limits::kMaxLabels)
      return Wrong("labels", fmt::format("at most {} labels", limits::kMaxLabels));
    for (const auto& [key, value] : labels.items()) {
      if (Status s = limits::CheckLabelKey("labels", key); !s.ok()) return s;
      if (!value.is_string()) return Wrong("labels." + key, "a string");
      const std::string v = value.get<std::string>();
      if (Status s = limits::CheckLabelValue("labels." + key, v); !s.ok()) return s;
      out.labels.emplace(key, v);
    }
  }
  return out;
}

Result<SyncBody> ParseSyncBody(std::string_view text) {
  Result<Json> parsed = Object(text);
  if (!parsed.ok()) return parsed.status();
  const Json& body = *parsed;
  if (Status s = OnlyFields(body, {"revision", "tasks"}, ""); !s.ok()) return s;
  SyncBody out;
  if (body.contains("revision")) {
    if (!body["revision"].is_string() || body["revision"].get_ref<const std::string&>().size() > 64)
      return Wrong("revision", "a string the last answer gave (at most 64 bytes)");
    out.revision = body["revision"].get<std::string>();
  }
  if (!body.contains("tasks")) return out;
  const Json& tasks = body["tasks"];
  if (!tasks.is_array()) return Wrong("tasks", "an array of objects");
  if (tasks.size() > kMaxReports)
    return Wrong("tasks", fmt::format("at most {} tasks", kMaxReports));
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    const Json& t = tasks[i];
    const std::string f = fmt::format("tasks[{}]", i);
    if (!t.is_object()) return Wrong(f, "an object");
    if (Status s = OnlyFields(
            t, {"job", "rank", "run", "running", "exit_code", "signal", "lost", "checkpoint_ms"},
            f + ".");
        !s.ok())
      return s;
    for (const char* key : {"job", "rank", "run"}) {
      if (!t.contains(key)) return Wrong(fmt::format("{}.{}", f, key), "given (an integer)");
    }
    TaskReport r;
    std::int64_t job = 0, rank = 0, exit_code = -1, signal = 0;
    constexpr std::int64_t kInt32Max = std::numeric_limits<std::int32_t>::max();
    if (Status s = Integer(t, "job", f + ".job", 1, std::numeric_limits<std::int64_t>::max(), job);
        !s.ok())
      return s;
    if (Status s =
            Integer(t, "rank", f + ".rank", 0, std::numeric_limits<std::uint32_t>::max(), rank);
        !s.ok())
      return s;
    if (Status s = Integer(t, "run", f + ".run", 0, limits::kMaxTime, r.run); !s.ok()) return s;
    if (Status s = Boolean(t, "running", f + ".running", r.running); !s.ok()) return s;
    if (Status s = Integer(t, "exit_code", f + ".exit_code", -1, kInt32Max, exit_code); !s.ok())
      return s;
    if (Status s = Integer(t, "signal", f + ".signal", 0, 128, signal); !s.ok()) return s;
    if (Status s = Boolean(t, "lost", f + ".lost", r.lost); !s.ok()) return s;
    if (Status s =
            Integer(t, "checkpoint_ms", f + ".checkpoint_ms", -1, limits::kMaxTime, r.checkpoint);
        !s.ok())
      return s;
    r.job = static_cast<JobId>(job);
    r.rank = static_cast<std::uint32_t>(rank);
    r.exit_code = static_cast<int>(exit_code);
    r.signal = static_cast<int>(signal);
    out.reports.push_back(r);
  }
  return out;
}

std::string UrlHost(std::string_view url) {
  std::string_view rest;
  if (url.rfind("http://", 0) == 0) {
    rest = url.substr(7);
  } else if (url.rfind("https://", 0) == 0) {
    rest = url.substr(8);
  } else {
    return "";
  }
  const std::size_t colon = rest.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return "";
  const std::string_view port = rest.substr(colon + 1);
  int p = 0;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
  if (ec != std::errc() || end != port.data() + port.size() || p <= 0 || p > 65535) return "";
  std::string_view host = rest.substr(0, colon);
  for (char c : host) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '.' || c == ':' || c == '[' || c == ']';
    if (!ok) return "";
  }
  return std::string(host);
}

namespace {

// The IP addresses of `address`: itself, or those its name resolves to.
std::vector<std::string> AddressesOf(const std::string& address) {
  if (std::string ip = CanonicalIp(address); !ip.empty()) return {ip};
  std::vector<std::string> out;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(address.c_str(), nullptr, &hints, &found) != 0) return out;
  for (addrinfo* a = found; a; a = a->ai_next) {
    char text[INET6_ADDRSTRLEN] = {};
    const void* where =
        a->ai_family == AF_INET
            ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr)
            : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr);
    if (inet_ntop(a->ai_family, where, text, sizeof text)) out.push_back(CanonicalIp(text));
  }
  freeaddrinfo(found);
  return out;
}

// Whether `ip` is an address of this machine (any interface, loopback included).
bool IsLocal(const std::string& ip) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return false;
  bool local = false;
  for (ifaddrs* i = list; i && !local; i = i->ifa_next) {
    if (!i->ifa_addr || (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6))
      continue;
    char text[INET6_ADDRSTRLEN] = {};
    const void* where =
        i->ifa_addr->sa_family == AF_INET
            ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr)
            : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(i->ifa_addr)->sin6_addr);
    if (inet_ntop(i->ifa_addr->sa_family, where, text, sizeof text))
      local = CanonicalIp(text) == ip;
  }
  freeifaddrs(list);
  return local;
}

}  // namespace

bool AddressIsPeer(const std::string& address, const std::string& peer) {
  const std::string want = CanonicalIp(peer);
  if (want.empty()) return false;
  const std::vector<std::string> ips = AddressesOf(address);
  for (const std::string& ip : ips)
    if (ip == want) return true;
  // An agent on the server's own machine may give any address of that machine (it connects from
  // whichever interface the route to the server takes).
  if (!IsLocal(want)) return false;
  for (const std::string& ip : ips)
    if (ip == "127.0.0.1" || ip == "::1" || IsLocal(ip)) return true;
  return false;
}

}  // namespace arbiter::server
