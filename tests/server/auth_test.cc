// Who is calling: token digests, join tokens and node credentials (server/auth.h), the tokens of
// the configuration (config.h), the limits on texts (job/limits.h) and the agents' bodies
// (server/agent_wire.h), without a server.
#include "server/auth.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "config/config.h"
#include "crypto/crypto.h"
#include "job/limits.h"
#include "server/agent_wire.h"

namespace arbiter::server {
namespace {

using Role = config::TokenSpec::Role;

config::TokenSpec Token(const std::string& name, const std::string& secret, Role role) {
  config::TokenSpec t;
  t.name = name;
  t.sha256 = crypto::Sha256Hex(secret);
  t.role = role;
  return t;
}

TEST(Crypto, DigestsAndMacsAreTheStandardOnes) {
  // FIPS 180-2's and RFC 4231's test vectors.
  EXPECT_EQ(crypto::Sha256Hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(crypto::HmacSha256Hex("Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_EQ(crypto::RandomHex(32).size(), 64u);
  EXPECT_NE(crypto::RandomHex(16), crypto::RandomHex(16));
  EXPECT_TRUE(crypto::EqualConstantTime("same", "same"));
  EXPECT_FALSE(crypto::EqualConstantTime("same", "sane"));
  EXPECT_FALSE(crypto::EqualConstantTime("same", "same!"));
  EXPECT_TRUE(crypto::IsSha256Hex(crypto::Sha256Hex("x")));
  EXPECT_FALSE(crypto::IsSha256Hex("abc"));
}

TEST(Auth, PatternsMatchWholeNamesWithStars) {
  EXPECT_TRUE(MatchesPattern("gpu-*", "gpu-7"));
  EXPECT_TRUE(MatchesPattern("gpu-*-a", "gpu-1-2-a"));
  EXPECT_TRUE(MatchesPattern("*", "anything"));
  EXPECT_TRUE(MatchesPattern("n-0", "n-0"));
  EXPECT_FALSE(MatchesPattern("n-0", "n-01"));
  EXPECT_FALSE(MatchesPattern("gpu-*", "cpu-1"));
  EXPECT_FALSE(MatchesPattern("gpu-*-a", "gpu-1-b"));
}

TEST(Auth, TokensAreKnownByTheirDigestAndExpire) {
  config::TokenSpec alice = Token("alice", "alice-secret-token-1", Role::kUser);
  alice.priority_classes = {"P2"};
  config::TokenSpec old = Token("old", "an-old-secret-token-1", Role::kAdmin);
  old.expires = 1000;
  const Authenticator auth({alice, old}, "node-key-node-key-node-key-node-key");
  Result<Caller> who = auth.Authenticate("alice-secret-token-1", 0);
  ASSERT_TRUE(who.ok()) << who.status().message();
  EXPECT_EQ(who->name, "alice");
  EXPECT_TRUE(who->MayUseClass("P2"));
  EXPECT_FALSE(who->MayUseClass("P0"));
  EXPECT_EQ(auth.Authenticate("alice-secret-token-2", 0).status().code(),
            StatusCode::kUnauthenticated);
  // The digest itself is no token.
  EXPECT_FALSE(auth.Authenticate(crypto::Sha256Hex("alice-secret-token-1"), 0).ok());
  EXPECT_TRUE(auth.Authenticate("an-old-secret-token-1", 1000).ok());
  Result<Caller> expired = auth.Authenticate("an-old-secret-token-1", 1001);
  EXPECT_EQ(expired.status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(expired.status().message(), "Authorization: the token of old has expired");
}

TEST(Auth, ANodeCredentialNamesItsNodeAndCannotBeMadeForAnother) {
  config::TokenSpec pool = Token("pool-a", "pool-a-join-token-1", Role::kAgent);
  pool.nodes = {"a-*"};
  const Authenticator auth({pool}, "node-key-node-key-node-key-node-key");
  Result<Caller> join = auth.Authenticate("pool-a-join-token-1", 0);
  ASSERT_TRUE(join.ok());
  EXPECT_TRUE(join->node.empty());
  EXPECT_TRUE(join->MayJoinAs("a-3"));
  EXPECT_FALSE(join->MayJoinAs("b-3"));

  const std::string credential = auth.NodeCredential("a-3");
  EXPECT_EQ(credential.rfind("arbiter-node.a-3.", 0), 0u);
  Result<Caller> node = auth.Authenticate(credential, 0);
  ASSERT_TRUE(node.ok()) << node.status().message();
  EXPECT_EQ(node->node, "a-3");
  EXPECT_EQ(node->role, Role::kAgent);
  EXPECT_FALSE(node->MayJoinAs("a-3"));  // a credential is no join token
  // Its MAC under another name, a changed MAC, another server's key: refused.
  std::string renamed = credential;
  renamed.replace(renamed.find("a-3"), 3, "a-4");
  EXPECT_EQ(auth.Authenticate(renamed, 0).status().code(), StatusCode::kUnauthenticated);
  std::string changed = credential;
  changed.back() = changed.back() == '0' ? '1' : '0';
  EXPECT_FALSE(auth.Authenticate(changed, 0).ok());
  const Authenticator other({pool}, "another-key-another-key-another-key");
  EXPECT_FALSE(other.Authenticate(credential, 0).ok());
  EXPECT_FALSE(auth.Authenticate("arbiter-node.", 0).ok());
  // Node names with dots are whole: the MAC is the last 64 digits.
  EXPECT_EQ(auth.Authenticate(auth.NodeCredential("rack.1.gpu"), 0)->node, "rack.1.gpu");
  EXPECT_NE(auth.LogToken("a-3"), auth.LogToken("a-4"));
  EXPECT_EQ(credential.find(auth.LogToken("a-3")), std::string::npos);
}

TEST(Auth, TheNodeKeyIsMadeOnceAndKept) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("arbiter-auth-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  Result<std::string> made = LoadOrCreateNodeKey(dir.string());
  ASSERT_TRUE(made.ok()) << made.status().message();
  EXPECT_EQ(made->size(), 64u);
  const auto perms = std::filesystem::status(dir / "node-credentials.key").permissions();
  EXPECT_EQ(perms & (std::filesystem::perms::group_all | std::filesystem::perms::others_all),
            std::filesystem::perms::none);
  Result<std::string> again = LoadOrCreateNodeKey(dir.string());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *made);
  std::ofstream(dir / "node-credentials.key") << "short\n";
  EXPECT_FALSE(LoadOrCreateNodeKey(dir.string()).ok());
  std::filesystem::remove_all(dir);
}

std::string ClusterWithTokens(const std::string& tokens) {
  return R"(
priority_classes:
  - {name: P0, value: 100}
  - {name: P2, value: 10}
queues:
  - {name: main}
nodes:
  - {name: n-0, gpus: {model: G, count: 1, memory: 40Gi}, cpu: 8, memory: 64Gi}
server:
  tokens:
)" + tokens;
}

std::string LoadError(const std::string& tokens) {
  Result<config::ClusterConfig> c = config::ParseCluster(ClusterWithTokens(tokens), "c.yaml");
  return c.ok() ? "" : c.status().message();
}

TEST(ConfigTokens, SecretsAreKeptAsDigestsFromTheFileOrAFile) {
  const std::string digest = crypto::Sha256Hex("a-token-of-the-admin");
  Result<config::ClusterConfig> c = config::ParseCluster(
      ClusterWithTokens("    - {name: admin, role: admin, token_sha256: " + digest + "}\n" +
                        "    - {name: dev, role: user, token: a-token-in-the-file, queues: [main],"
                        " priority_classes: [P2]}\n"
                        "    - {name: pool, role: agent, token_sha256: " +
                        crypto::Sha256Hex("the-pool-join-token") +
                        ", nodes: [\"n-*\"], expires: 2027-01-02T03:04:05Z}\n"),
      "c.yaml");
  ASSERT_TRUE(c.ok()) << c.status().message();
  const auto& t = c->server.tokens;
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t[0].sha256, digest);
  EXPECT_FALSE(t[0].inline_secret);
  EXPECT_EQ(t[1].sha256, crypto::Sha256Hex("a-token-in-the-file"));
  EXPECT_TRUE(t[1].inline_secret);
  EXPECT_EQ(t[1].priority_classes, std::vector<std::string>{"P2"});
  EXPECT_EQ(t[2].nodes, std::vector<std::string>{"n-*"});
  EXPECT_EQ(t[2].expires, 1798859045000);

  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("arbiter-tokens-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "alice.token") << "alice-token-from-a-file\n";
  std::ofstream(dir / "c.yaml") << ClusterWithTokens(
      "    - {name: alice, role: user, token_file: alice.token, queues: [main]}\n");
  Result<config::ClusterConfig> from_file = config::LoadClusterFile((dir / "c.yaml").string());
  ASSERT_TRUE(from_file.ok()) << from_file.status().message();
  EXPECT_EQ(from_file->server.tokens[0].sha256, crypto::Sha256Hex("alice-token-from-a-file"));
  std::filesystem::remove_all(dir);
}

TEST(ConfigTokens, BadTokensAreRefusedNamingTheField) {
  EXPECT_NE(LoadError("    - {name: a, role: admin}\n").find("give the secret"), std::string::npos);
  EXPECT_NE(LoadError("    - {name: a, role: admin, token: short-token}\n")
                .find("tokens[0].token: a token must be at least 16 characters"),
            std::string::npos);
  EXPECT_NE(LoadError("    - {name: a, role: admin, token_sha256: abc}\n")
                .find("tokens[0].token_sha256: must be a SHA-256 digest"),
            std::string::npos);
  EXPECT_NE(LoadError("    - {name: a, role: admin, token_file: /no/such/file}\n")
                .find("tokens[0].token_file"),
            std::string::npos);
  EXPECT_NE(LoadError("    - {name: a, role: user, token: a-long-enough-token, priority_classes: "
                      "[P9]}\n")
                .find("unknown priority class 'P9'"),
            std::string::npos);
  EXPECT_NE(LoadError("    - {name: a, role: admin, token: a-long-enough-token, nodes: [x]}\n")
                .find("only an agent token names nodes"),
            std::string::npos);
  EXPECT_NE(LoadError("    - {name: a, role: agent, token: a-long-enough-token, expires: "
                      "tomorrow}\n")
                .find("expected a UTC time"),
            std::string::npos);
  EXPECT_NE(LoadError("    - {name: a, role: admin, token: a-long-enough-token}\n"
                      "    - {name: b, role: admin, token: a-long-enough-token}\n")
                .find("the same token is given at line"),
            std::string::npos);
  EXPECT_FALSE(config::ParseUtcTime("2027-02-31T00:00:00Z"));
  EXPECT_EQ(config::ParseUtcTime("1970-01-01T00:00:01Z"), 1000);
}

TEST(Limits, TextsThatATerminalWouldNotShowAsThemselvesAreFound) {
  EXPECT_EQ(limits::FindUnprintable("plain name"), std::string_view::npos);
  EXPECT_EQ(limits::FindUnprintable("caf\xc3\xa9"), std::string_view::npos);  // é
  EXPECT_EQ(limits::FindUnprintable("a\x1b[31m"), 1u);
  EXPECT_EQ(limits::FindUnprintable(std::string("a\0b", 3)), 1u);
  EXPECT_EQ(limits::FindUnprintable("ab\xe2\x80\xae"), 2u);  // U+202E
  EXPECT_EQ(limits::FindUnprintable("\xe2\x80\x8b"), 0u);    // U+200B
  EXPECT_EQ(limits::FindUnprintable("x\xc2\x85"), 1u);       // U+0085
  EXPECT_EQ(limits::FindUnprintable("\xef\xbb\xbfx"), 0u);   // U+FEFF
  // Default-ignorable characters that are not format characters: they show as nothing too.
  EXPECT_EQ(limits::FindUnprintable("ad\xe3\x85\xa4min"), 2u);  // U+3164 Hangul filler
  EXPECT_EQ(limits::FindUnprintable("a\xe1\x85\x9f"), 1u);      // U+115F
  EXPECT_EQ(limits::FindUnprintable("a\xef\xbe\xa0"), 1u);      // U+FFA0
  EXPECT_EQ(limits::FindUnprintable("a\xcd\x8f"), 1u);          // U+034F
  EXPECT_EQ(limits::FindUnprintable("a\xef\xb8\x8f"), 1u);      // U+FE0F
  EXPECT_EQ(limits::FindUnprintable("a\xf3\xa0\x84\x80"), 1u);  // U+E0100
  EXPECT_EQ(limits::FindUnprintable("\xe1\xa0\x8b"), 0u);       // U+180B
  EXPECT_EQ(limits::FindUnprintable("\xe3\x85\xa3\xef\xbe\x9f"),
            std::string_view::npos);  // visible Hangul
  EXPECT_EQ(limits::Printable("ad\xe3\x85\xa4min"), "ad\\u3164min");
  EXPECT_EQ(limits::FindUnprintable("a\nb\tc", "\n\t"), std::string_view::npos);
  EXPECT_EQ(limits::Printable("red \x1b[31m!\xe2\x80\xae"), "red \\x1b[31m!\\u202e");
  EXPECT_EQ(limits::Printable("two\nlines", "\n"), "two\nlines");
  EXPECT_EQ(limits::Printable("two\nlines"), "two\\x0alines");
}

TEST(Limits, NamesAndLabelsFollowKubernetes) {
  EXPECT_TRUE(limits::CheckObjectName("name", "llama-70b_pretrain.v2").ok());
  EXPECT_EQ(limits::CheckObjectName("name", "-lead").message(),
            "name: must be letters, digits, '-', '_' and '.', beginning and ending with a letter "
            "or digit, got '-lead'");
  EXPECT_FALSE(limits::CheckObjectName("name", "with space").ok());
  EXPECT_FALSE(limits::CheckObjectName("name", std::string(254, 'a')).ok());
  EXPECT_EQ(limits::CheckObjectName("name", "a\x1b").message(),
            "name: must not contain control or invisible formatting characters (one at byte 1)");
  EXPECT_TRUE(limits::CheckLabelKey("labels", "gpu.nvidia.com/class").ok());
  EXPECT_TRUE(limits::CheckLabelKey("labels", "team").ok());
  EXPECT_FALSE(limits::CheckLabelKey("labels", "Upper.Case/x").ok());
  EXPECT_FALSE(limits::CheckLabelKey("labels", "/x").ok());
  EXPECT_FALSE(limits::CheckLabelKey("labels", std::string(64, 'k')).ok());
  EXPECT_TRUE(limits::CheckLabelValue("labels.team", "").ok());
  EXPECT_FALSE(limits::CheckLabelValue("labels.team", "a b").ok());
  EXPECT_FALSE(limits::CheckDuration("runtime_estimate_ms", limits::kMaxDuration + 1).ok());
  EXPECT_TRUE(limits::CheckDuration("runtime_estimate_ms", limits::kMaxDuration).ok());
}

TEST(AgentWire, BodiesAreReadWholeIntoTypesOrRefusedNamingTheField) {
  Result<RegisterBody> ok = ParseRegisterBody(
      R"({"devices": [{"model": "H800", "memory_mib": 81559, "nvlink_group": 0}],
          "cpu_milli": 192000, "address": "10.0.0.7", "log_url": "https://10.0.0.7:4000",
          "labels": {"rack": "r3"}})");
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->devices.at(0).model, "H800");
  EXPECT_EQ(ok->labels.at("rack"), "r3");
  auto field = [](std::string_view body) { return ParseRegisterBody(body).status().field(); };
  EXPECT_EQ(field(R"({"devices": [{"model": 7}]})"), "devices[0].model");
  EXPECT_EQ(field(R"({"devices": {}})"), "devices");
  EXPECT_EQ(field(R"({"cpu_milli": "8"})"), "cpu_milli");
  EXPECT_EQ(field(R"({"cpu_milli": -1})"), "cpu_milli");
  EXPECT_EQ(field(R"({"address": ["x"]})"), "address");
  EXPECT_EQ(field(R"({"log_url": "ftp://x:1"})"), "log_url");
  EXPECT_EQ(field(R"({"labels": {"zone": 7}})"), "labels.zone");
  EXPECT_EQ(field(R"({"hostname": "a\u001bb"})"), "hostname");
  EXPECT_EQ(field(R"({"surprise": 1})"), "surprise");
  EXPECT_EQ(field("[1]"), "body");
  EXPECT_EQ(field(R"({"cpu_milli": 1e400})"), "body");  // too large for a double: malformed
  EXPECT_EQ(field(std::string(100, '[') + std::string(100, ']')), "body");

  Result<SyncBody> sync = ParseSyncBody(
      R"({"revision": "ab.3", "tasks": [{"job": 7, "rank": 1, "run": 5, "running": false,
          "exit_code": 0, "checkpoint_ms": 9}]})");
  ASSERT_TRUE(sync.ok()) << sync.status().message();
  EXPECT_EQ(sync->revision, "ab.3");
  EXPECT_EQ(sync->reports.at(0).rank, 1u);
  EXPECT_FALSE(sync->reports.at(0).running);
  auto sync_field = [](std::string_view body) { return ParseSyncBody(body).status().field(); };
  EXPECT_EQ(sync_field(R"({"revision": -1})"), "revision");
  EXPECT_EQ(sync_field(R"({"version": 0})"), "version");  // not a field of the sync
  EXPECT_EQ(sync_field(R"({"tasks": [{"job": 1, "rank": 0}]})"), "tasks[0].run");
  EXPECT_EQ(sync_field(R"({"tasks": [{"job": 0, "rank": 0, "run": 1}]})"), "tasks[0].job");
  EXPECT_EQ(sync_field(R"({"tasks": [{"job": 1, "rank": 4294967296, "run": 1}]})"),
            "tasks[0].rank");
  EXPECT_EQ(sync_field(R"({"tasks": [{"job": 1, "rank": 0, "run": 1, "running": 1}]})"),
            "tasks[0].running");
  EXPECT_EQ(sync_field(R"({"tasks": [{"job": 1.5, "rank": 0, "run": 1}]})"), "tasks[0].job");
  EXPECT_EQ(sync_field(R"({"tasks": [{"job": 1, "rank": 0, "run": 1, "signal": 999}]})"),
            "tasks[0].signal");
}

TEST(AgentWire, AnAgentsAddressMustBeWhereItConnectsFrom) {
  EXPECT_TRUE(AddressIsPeer("10.1.2.3", "10.1.2.3"));
  EXPECT_TRUE(AddressIsPeer("10.1.2.3", "::ffff:10.1.2.3"));
  EXPECT_FALSE(AddressIsPeer("10.1.2.4", "10.1.2.3"));
  EXPECT_TRUE(AddressIsPeer("localhost", "127.0.0.1"));
  // On the server's own machine, any of its addresses.
  EXPECT_TRUE(AddressIsPeer("127.0.0.1", "127.0.0.1"));
  EXPECT_FALSE(AddressIsPeer("192.0.2.1", "127.0.0.1"));  // TEST-NET-1: nobody's
  EXPECT_EQ(UrlHost("http://10.0.0.7:4000"), "10.0.0.7");
  EXPECT_EQ(UrlHost("https://gpu-7:4000"), "gpu-7");
  EXPECT_EQ(UrlHost("http://10.0.0.7:4000/x"), "");
  EXPECT_EQ(UrlHost("http://user@evil:4000"), "");
  EXPECT_EQ(UrlHost("http://10.0.0.7"), "");
}

}  // namespace
}  // namespace arbiter::server
