#include "server/auth.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "crypto/crypto.h"

namespace arbiter::server {
namespace {

using Role = config::TokenSpec::Role;
constexpr std::string_view kCredentialPrefix = "arbiter-node.";

}  // namespace

bool MatchesPattern(std::string_view pattern, std::string_view name) {
  // Iterative glob with '*' only: the last star's position is kept to backtrack to.
  std::size_t p = 0, n = 0, star = std::string_view::npos, mark = 0;
  while (n < name.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = n;
    } else if (p < pattern.size() && pattern[p] == name[n]) {
      ++p;
      ++n;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      n = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

bool Caller::MayUseClass(const std::string& priority_class) const {
  if (admin() || priority_classes.empty()) return true;
  return std::find(priority_classes.begin(), priority_classes.end(), priority_class) !=
         priority_classes.end();
}

bool Caller::MayJoinAs(const std::string& node_name) const {
  if (role != Role::kAgent || !node.empty()) return false;
  if (nodes.empty()) return true;
  return std::any_of(nodes.begin(), nodes.end(),
                     [&](const std::string& p) { return MatchesPattern(p, node_name); });
}

Authenticator::Authenticator(const std::vector<config::TokenSpec>& tokens, std::string node_key)
    : node_key_(std::move(node_key)) {
  for (const config::TokenSpec& t : tokens) {
    Known k;
    k.caller.name = t.name;
    k.caller.role = t.role;
    k.caller.queues = t.queues;
    k.caller.priority_classes = t.priority_classes;
    k.caller.nodes = t.nodes;
    k.expires = t.expires;
    by_digest_[t.sha256] = std::move(k);
  }
}

Result<Caller> Authenticator::Authenticate(std::string_view bearer, Millis now) const {
  if (bearer.rfind(kCredentialPrefix, 0) == 0) {
    // arbiter-node.NAME.MAC: the MAC is the last 64 characters, after a '.'.
    const std::string_view rest = bearer.substr(kCredentialPrefix.size());
    if (rest.size() > 65 && rest[rest.size() - 65] == '.') {
      const std::string node(rest.substr(0, rest.size() - 65));
      if (crypto::EqualConstantTime(
              rest.substr(rest.size() - 64),
              NodeCredential(node).substr(kCredentialPrefix.size() + node.size() + 1))) {
        Caller c;
        c.name = "agent:" + node;
        c.role = Role::kAgent;
        c.node = node;
        return c;
      }
    }
    return Status::FromCode(StatusCode::kUnauthenticated,
                            "a node credential this server did not issue (its node key changed?): "
                            "join again with a join token",
                            "Authorization");
  }
  // The digest is looked up, then compared in constant time: the lookup's time depends on the
  // digest, which tells nothing of the secret.
  const std::string digest = crypto::Sha256Hex(bearer);
  auto it = by_digest_.find(digest);
  if (it == by_digest_.end() || !crypto::EqualConstantTime(it->first, digest))
    return Status::FromCode(StatusCode::kUnauthenticated, "unknown token", "Authorization");
  if (it->second.expires >= 0 && now > it->second.expires) {
    return Status::FromCode(StatusCode::kUnauthenticated,
                            fmt::format("the token of {} has expired", it->second.caller.name),
                            "Authorization");
  }
  return it->second.caller;
}

std::string Authenticator::NodeCredential(const std::string& node) const {
  return std::string(kCredentialPrefix) + node + "." +
         crypto::HmacSha256Hex(node_key_, "node:" + node);
}

std::string Authenticator::LogToken(const std::string& node) const {
  return crypto::HmacSha256Hex(node_key_, "logs:" + node);
}

Result<std::string> LoadOrCreateNodeKey(const std::string& data_dir) {
  const std::string path = (std::filesystem::path(data_dir) / "node-credentials.key").string();
  std::error_code ec;
  std::filesystem::create_directories(data_dir, ec);
  if (ec) {
    return Status::FromCode(StatusCode::kUnavailable,
                            fmt::format("{}: cannot create: {}", data_dir, ec.message()), "--data");
  }
  if (std::ifstream in(path); in) {
    std::stringstream text;
    text << in.rdbuf();
    std::string key = text.str();
    while (!key.empty() && (key.back() == '\n' || key.back() == '\r')) key.pop_back();
    if (key.size() < 32) {
      return Status::InvalidArgument(
          fmt::format("{}: a node key is at least 32 characters; delete the file to make a new "
                      "one (every node then joins again)",
                      path),
          "--data");
    }
    return key;
  }
  const std::string key = crypto::RandomHex(32);
  if (key.empty())
    return Status::Internal("the system's random generator failed; no node key was made");
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
  if (fd < 0) {
    return Status::FromCode(StatusCode::kUnavailable,
                            fmt::format("{}: cannot create: {}", path, std::strerror(errno)),
                            "--data");
  }
  const std::string line = key + "\n";
  const bool written = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  const bool synced = ::fsync(fd) == 0;
  ::close(fd);
  if (!written || !synced) {
    return Status::FromCode(StatusCode::kUnavailable, fmt::format("{}: cannot write", path),
                            "--data");
  }
  return key;
}

}  // namespace arbiter::server
