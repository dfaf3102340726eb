// Who is calling: bearer tokens (kept as SHA-256 digests, compared in constant time), the join
// tokens of node agents, and the credential each node gets when it registers (docs/security.md).
//
// A node's credential is "arbiter-node.NAME.MAC" with MAC = HMAC-SHA-256(node key, "node:NAME"):
// it names the node it was issued to and cannot be made for another without the node key, which
// the server keeps in its data directory (node-credentials.key, created on first start). The
// server sends an agent's log server the node's log token, HMAC-SHA-256(node key, "logs:NAME"),
// never a user's token or its own. Rotating the key (deleting the file) revokes every credential:
// agents then join again with their join token.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "arbiter/status.h"
#include "config/config.h"

namespace arbiter::server {

// Who is calling, as the token said.
struct Caller {
  std::string name;
  config::TokenSpec::Role role = config::TokenSpec::Role::kUser;
  std::vector<std::string> queues;            // a user's queues
  std::vector<std::string> priority_classes;  // a user's classes (empty: any)
  // An agent: the node its credential was issued to; empty for a join token, which may only
  // register (as one of `nodes`).
  std::string node;
  std::vector<std::string> nodes;
  bool admin() const { return role == config::TokenSpec::Role::kAdmin; }
  // A viewer reads and changes nothing (the HTTP layer refuses it every method but GET).
  bool viewer() const { return role == config::TokenSpec::Role::kViewer; }
  // Whether the caller may give a job this priority class (submit, change).
  bool MayUseClass(const std::string& priority_class) const;
  // Whether a join token may register as `node_name` (its names and '*' patterns).
  bool MayJoinAs(const std::string& node_name) const;
};

class Authenticator {
 public:
  Authenticator(const std::vector<config::TokenSpec>& tokens, std::string node_key);

  // The caller of `Authorization: Bearer TOKEN` at `now` (Unix ms). Errors say why without
  // telling whether a token exists: unknown, or expired (an expired one is named: its holder
  // knows it).
  Result<Caller> Authenticate(std::string_view bearer, Millis now) const;

  std::string NodeCredential(const std::string& node) const;
  std::string LogToken(const std::string& node) const;

 private:
  struct Known {
    Caller caller;
    Millis expires = -1;
  };
  std::unordered_map<std::string, Known> by_digest_;  // SHA-256 hex -> caller
  std::string node_key_;
};

// The node key of `data_dir` (node-credentials.key), created (32 random bytes, mode 0600) when
// missing. Errors name the file.
Result<std::string> LoadOrCreateNodeKey(const std::string& data_dir);

// Whether `name` matches `pattern`, where '*' stands for any run of characters.
bool MatchesPattern(std::string_view pattern, std::string_view name);

}  // namespace arbiter::server
