// Following the leader among several servers: the rules of src/net/follow.h on their own (a
// clock of the test's), then the command (the front, `arbiter`, and the whole program,
// `arbiter-full`) run against stand-in servers where one answers as a standby (a redirect, or 503
// while no leader is known) and the other as the leader, or one answers 503 for a while (a
// leader still recovering, a deposed one), or never answers at all.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "net/follow.h"
#include "testing/fake_http.h"

namespace arbiter::testing {
namespace {

using net::LeaderFollower;
using net::Outcome;
using Action = LeaderFollower::Action;
using std::chrono::milliseconds;
using Json = nlohmann::json;

// ---- the rules ----

TEST(SplitServers, TrimsAddsTheSchemeAndSkipsEmptyEntries) {
  EXPECT_EQ(net::SplitServers("http://a:1, b:2 ,,https://c:3/"),
            (std::vector<std::string>{"http://a:1", "http://b:2", "https://c:3"}));
  EXPECT_EQ(net::SplitServers("a"), std::vector<std::string>{"http://a"});
  EXPECT_TRUE(net::SplitServers(" , ").empty());
}

TEST(SplitHttpUrl, TakesHttpAndHttpsOnly) {
  auto url = net::SplitHttpUrl("http://10.0.0.2:8642/v1/jobs?queue=q");
  ASSERT_TRUE(url);
  EXPECT_EQ(url->base, "http://10.0.0.2:8642");
  EXPECT_EQ(url->path, "/v1/jobs?queue=q");
  url = net::SplitHttpUrl("https://[::1]:8642");
  ASSERT_TRUE(url);
  EXPECT_EQ(url->base, "https://[::1]:8642");
  EXPECT_EQ(url->path, "/");
  EXPECT_FALSE(net::SplitHttpUrl("/v1/jobs"));
  EXPECT_FALSE(net::SplitHttpUrl("ftp://a/b"));
  EXPECT_FALSE(net::SplitHttpUrl("http:///v1"));
  EXPECT_FALSE(net::SplitHttpUrl("http://user@evil/v1"));
  EXPECT_FALSE(net::SplitHttpUrl("http://a/v1\r\nX: y"));
}

Outcome Answer(int status) { return Outcome{status, {}, {}, std::nullopt, {}, {}, std::nullopt}; }
Outcome NoAnswer() { return Outcome{0, "Connection", {}, std::nullopt, {}, {}, std::nullopt}; }
Outcome Redirect(const std::string& location) {
  return Outcome{307, {}, location, std::string("x"), {}, {}, std::nullopt};
}
Outcome NoLeader() { return Outcome{503, {}, {}, std::string(), "standby", {}, std::nullopt}; }
// A 503 without `leader`: a server that leads (or led) but cannot serve now.
Outcome Unavailable(std::optional<milliseconds> retry_after = std::nullopt) {
  return Outcome{503, {}, {}, std::nullopt, "recovering", {}, retry_after};
}

TEST(LeaderFollower, FollowsARedirectWithItsPathAndRemembersWhoAnswered) {
  const auto t0 = LeaderFollower::Clock::now();
  LeaderFollower f({"http://a:1", "http://b:2"});
  f.Begin("/v1/jobs?state=running", t0);
  EXPECT_EQ(f.base(), "http://a:1");
  auto d = f.Judge(Redirect("http://leader:9/v1/jobs?state=running"), t0);
  EXPECT_EQ(d.action, Action::kRetry);
  EXPECT_EQ(d.wait.count(), 0);
  EXPECT_EQ(f.base(), "http://leader:9");
  EXPECT_EQ(f.path(), "/v1/jobs?state=running");
  EXPECT_EQ(f.Judge(Answer(200), t0).action, Action::kTake);
  EXPECT_EQ(f.preferred(), "http://leader:9");
  // The next request goes to the leader first; when it fails, to the list in order.
  f.Begin("/v1/queues", t0);
  EXPECT_EQ(f.base(), "http://leader:9");
  EXPECT_EQ(f.Judge(NoAnswer(), t0).action, Action::kRetry);
  EXPECT_EQ(f.base(), "http://a:1");
  EXPECT_EQ(f.path(), "/v1/queues");
  EXPECT_EQ(f.preferred(), "");
}

TEST(LeaderFollower, PassesStandbysAndDeadServersThenWaitsLongerEachRound) {
  const auto t0 = LeaderFollower::Clock::now();
  LeaderFollower f({"http://a:1", "http://b:2"});
  f.Begin("/v1/jobs", t0);
  auto d = f.Judge(NoLeader(), t0);
  EXPECT_EQ(d.action, Action::kRetry);
  EXPECT_EQ(d.wait.count(), 0);
  EXPECT_EQ(f.base(), "http://b:2");
  d = f.Judge(NoAnswer(), t0);  // the end of a round: a wait, then a again
  EXPECT_EQ(d.action, Action::kRetry);
  EXPECT_EQ(d.wait, milliseconds(200));
  EXPECT_EQ(f.base(), "http://a:1");
  std::vector<long> waits;
  auto now = t0;
  for (int i = 0; i < 40; ++i) {
    d = f.Judge(NoAnswer(), now);
    if (d.action != Action::kRetry) break;
    if (d.wait.count() > 0) waits.push_back(static_cast<long>(d.wait.count()));
    now += d.wait;
  }
  // The last round starts at the deadline, 15 s after the start; the round after is given up.
  EXPECT_EQ(waits, (std::vector<long>{400, 800, 1600, 2000, 2000, 2000, 2000, 2000, 2000, 200}));
  EXPECT_EQ(d.action, Action::kGiveUp);
  EXPECT_EQ(f.Summary(), "http://a:1: no answer (Connection); http://b:2: no answer (Connection)");
}

TEST(LeaderFollower, AZeroDeadlineTriesEachAddressOnce) {
  const auto t0 = LeaderFollower::Clock::now();
  LeaderFollower::Settings once;
  once.deadline = milliseconds(0);
  LeaderFollower f({"http://a:1", "http://b:2", "http://c:3"}, once);
  f.Begin("/", t0);
  EXPECT_EQ(f.Judge(NoAnswer(), t0).action, Action::kRetry);
  EXPECT_EQ(f.Judge(NoLeader(), t0).action, Action::kRetry);
  EXPECT_EQ(f.Judge(NoAnswer(), t0).action, Action::kGiveUp);
  EXPECT_EQ(f.Summary(),
            "http://a:1: no answer (Connection); http://b:2: standby, no leader known: standby; "
            "http://c:3: no answer (Connection)");
}

TEST(LeaderFollower, WithoutADeadlineGoesOnForever) {
  const auto t0 = LeaderFollower::Clock::now();
  LeaderFollower::Settings forever;
  forever.deadline = std::nullopt;
  LeaderFollower f({"http://a:1"}, forever);
  f.Begin("/", t0);
  for (int i = 0; i < 100; ++i) {
    const auto d = f.Judge(NoAnswer(), t0 + std::chrono::hours(i));
    ASSERT_EQ(d.action, Action::kRetry);
    EXPECT_LE(d.wait, milliseconds(2000));
  }
}

TEST(LeaderFollower, RefusesBadRedirects) {
  const auto t0 = LeaderFollower::Clock::now();
  {
    LeaderFollower f({"https://a:1", "https://b:2"});
    f.Begin("/v1/jobs", t0);
    // From https to plain http the token would travel in the clear: not followed.
    f.Judge(Redirect("http://leader:9/v1/jobs"), t0);
    EXPECT_EQ(f.base(), "https://b:2");
    EXPECT_NE(f.Summary().find("from https to plain http"), std::string::npos) << f.Summary();
  }
  {
    LeaderFollower f({"http://a:1", "http://b:2"});
    f.Begin("/v1/jobs", t0);
    f.Judge(Redirect("/v1/jobs"), t0);  // not a URL of another server
    EXPECT_EQ(f.base(), "http://b:2");
    EXPECT_EQ(f.path(), "/v1/jobs");
  }
  {
    // Standbys sending each other round: at most four hops, then the next address.
    LeaderFollower f({"http://a:1", "http://b:2"});
    f.Begin("/v1/jobs", t0);
    for (int i = 0; i < 4; ++i) {
      f.Judge(Redirect(i % 2 ? "http://a:1/v1/jobs" : "http://c:3/v1/jobs"), t0);
      EXPECT_NE(f.base(), "http://b:2");
    }
    f.Judge(Redirect("http://c:3/v1/jobs"), t0);
    EXPECT_EQ(f.base(), "http://b:2");
    EXPECT_NE(f.Summary().find("too many redirects"), std::string::npos) << f.Summary();
  }
}

TEST(LeaderFollower, AStandbyNamingTheLeaderSendsThereAndARefusedAnswerPasses) {
  const auto t0 = LeaderFollower::Clock::now();
  LeaderFollower f({"http://a:1", "http://b:2"});
  f.Begin("/readyz", t0);
  f.Judge(Outcome{503, {}, {}, std::string("http://leader:9"), "standby", {}, std::nullopt}, t0);
  EXPECT_EQ(f.base(), "http://leader:9");
  EXPECT_EQ(f.path(), "/readyz");
  f.Judge(Outcome{200, {}, {}, std::nullopt, {}, "epoch 3, below 5", std::nullopt}, t0);
  EXPECT_EQ(f.base(), "http://b:2");
}

TEST(LeaderFollower, A503WithoutLeaderIsNotFinal) {
  const auto t0 = LeaderFollower::Clock::now();
  {
    // A deposed leader (or one still recovering, or whose commit was cut off): the next
    // address at once, the same path; the one that answers is taken.
    LeaderFollower f({"http://a:1", "http://b:2"});
    f.Begin("/v1/jobs", t0);
    auto d = f.Judge(Unavailable(milliseconds(1000)), t0);
    EXPECT_EQ(d.action, Action::kRetry);
    EXPECT_EQ(d.wait.count(), 0);
    EXPECT_EQ(f.base(), "http://b:2");
    EXPECT_EQ(f.path(), "/v1/jobs");
    EXPECT_EQ(f.Judge(Answer(201), t0).action, Action::kTake);
    EXPECT_EQ(f.preferred(), "http://b:2");
  }
  {
    // One address: the same one again, after the wait its Retry-After asks for (more than the
    // first backoff), then taken.
    LeaderFollower f({"http://a:1"});
    f.Begin("/v1/jobs", t0);
    auto d = f.Judge(Unavailable(milliseconds(1000)), t0);
    EXPECT_EQ(d.action, Action::kRetry);
    EXPECT_EQ(d.wait, milliseconds(1000));
    EXPECT_EQ(f.base(), "http://a:1");
    // Without Retry-After, the backoff alone.
    d = f.Judge(Unavailable(), t0 + d.wait);
    EXPECT_EQ(d.action, Action::kRetry);
    EXPECT_EQ(d.wait, milliseconds(400));
    EXPECT_EQ(f.Judge(Answer(201), t0 + milliseconds(1400)).action, Action::kTake);
    EXPECT_EQ(f.Summary(), "http://a:1: unavailable (HTTP 503): recovering");
  }
  {
    // Until the deadline: then given up, saying what the server said.
    LeaderFollower::Settings two_seconds;
    two_seconds.deadline = milliseconds(2000);
    LeaderFollower f({"http://a:1"}, two_seconds);
    f.Begin("/v1/jobs", t0);
    auto now = t0;
    int tries = 1;
    LeaderFollower::Decision d;
    while ((d = f.Judge(Unavailable(milliseconds(1000)), now)).action == Action::kRetry) {
      EXPECT_EQ(f.base(), "http://a:1");
      now += d.wait;
      ++tries;
      ASSERT_LT(tries, 100);
    }
    EXPECT_EQ(d.action, Action::kGiveUp);
    EXPECT_EQ(tries, 3);  // at 0, 1 s and 2 s
    EXPECT_EQ(f.Summary(), "http://a:1: unavailable (HTTP 503): recovering");
  }
  {
    // A zero deadline: one try.
    LeaderFollower::Settings once;
    once.deadline = milliseconds(0);
    LeaderFollower f({"http://a:1"}, once);
    f.Begin("/v1/jobs", t0);
    EXPECT_EQ(f.Judge(Unavailable(milliseconds(1000)), t0).action, Action::kGiveUp);
  }
}

TEST(LeaderFollower, EveryOtherStatusIsFinal) {
  const auto t0 = LeaderFollower::Clock::now();
  for (const int status : {200, 201, 204, 400, 401, 404, 409, 500, 502}) {
    LeaderFollower f({"http://a:1", "http://b:2"});
    f.Begin("/v1/jobs", t0);
    EXPECT_EQ(f.Judge(Answer(status), t0).action, Action::kTake) << status;
    EXPECT_EQ(f.preferred(), "http://a:1");
  }
}

TEST(LeaderFollower, RetryAfterIsHonouredUpToAFewSecondsAndTheDeadline) {
  const auto t0 = LeaderFollower::Clock::now();
  {
    // The longest Retry-After of the round, at most max_retry_after (5 s).
    LeaderFollower f({"http://a:1", "http://b:2"});
    f.Begin("/", t0);
    EXPECT_EQ(f.Judge(Unavailable(milliseconds(3000)), t0).wait.count(), 0);
    EXPECT_EQ(f.Judge(Unavailable(milliseconds(1000)), t0).wait, milliseconds(3000));
    EXPECT_EQ(f.Judge(Unavailable(std::chrono::hours(1)), t0).wait.count(), 0);
    EXPECT_EQ(f.Judge(NoAnswer(), t0).wait, milliseconds(5000));
    // The next round without one: the backoff only.
    f.Judge(NoAnswer(), t0);
    EXPECT_EQ(f.Judge(NoAnswer(), t0).wait, milliseconds(800));
  }
  {
    // Never past the deadline: the last round starts at it.
    LeaderFollower::Settings short_deadline;
    short_deadline.deadline = milliseconds(1500);
    LeaderFollower f({"http://a:1"}, short_deadline);
    f.Begin("/", t0);
    EXPECT_EQ(f.Judge(Unavailable(milliseconds(4000)), t0).wait, milliseconds(1500));
    EXPECT_EQ(f.Judge(Unavailable(milliseconds(4000)), t0 + milliseconds(1500)).action,
              Action::kGiveUp);
  }
  {
    // The agent's follower has no deadline: Retry-After still counts.
    LeaderFollower::Settings forever;
    forever.deadline = std::nullopt;
    LeaderFollower f({"http://a:1"}, forever);
    f.Begin("/", t0);
    EXPECT_EQ(f.Judge(Unavailable(milliseconds(2000)), t0).wait, milliseconds(2000));
  }
}

TEST(ParseRetryAfter, ReadsSecondsOnly) {
  EXPECT_EQ(net::ParseRetryAfter("1"), milliseconds(1000));
  EXPECT_EQ(net::ParseRetryAfter(" 12 "), milliseconds(12000));
  EXPECT_EQ(net::ParseRetryAfter("0"), milliseconds(0));
  EXPECT_FALSE(net::ParseRetryAfter(""));
  EXPECT_FALSE(net::ParseRetryAfter("-1"));
  EXPECT_FALSE(net::ParseRetryAfter("1.5"));
  EXPECT_FALSE(net::ParseRetryAfter("Wed, 21 Oct 2026 07:28:00 GMT"));
  EXPECT_FALSE(net::ParseRetryAfter("99999999999999999999"));
}

// ---- the command ----

struct CommandRun {
  int status = -1;
  std::string output;
  double seconds = 0;
};

std::string WholeProgram() {
  return (std::filesystem::path(ARBITER_BINARY).parent_path() / "arbiter-full").string();
}

// Runs `binary ARGS` with ARBITER_SERVER set to `servers` (no client file).
CommandRun RunCommand(const std::string& binary, const std::string& servers,
                      const std::string& args, const std::string& env = "") {
  const std::string command =
      "env -u ARBITER_FAILOVER_TIMEOUT ARBITER_CONFIG=/nonexistent "
      "ARBITER_TOKEN=t0k ARBITER_SERVER='" +
      servers + "' " + env + " timeout 120 " + binary + " " + args + " 2>&1";
  CommandRun r;
  const auto start = std::chrono::steady_clock::now();
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return r;
  char buffer[4096];
  std::size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) r.output.append(buffer, n);
  const int status = ::pclose(pipe);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

// A leader that lists one job, and answers submissions with the id 7.
FakeResponse LeaderAnswer(const FakeRequest& request) {
  FakeResponse r;
  if (request.Header("Authorization") != "Bearer t0k") {
    r.status = 401;
    r.body = R"({"error": {"code": "unauthenticated", "field": "", "message": "no token"}})";
  } else if (request.method == "POST" && request.target == "/v1/jobs") {
    r.status = 201;
    r.body = R"({"id": 7, "name": "x", "duplicate": false})";
  } else {
    r.body = R"({"jobs": [{"id": 42, "leader": "is me"}]})";
  }
  return r;
}

class CommandFollowsTheLeader : public ::testing::TestWithParam<std::string> {};

TEST_P(CommandFollowsTheLeader, FromAStandbysRedirect) {
  FakeHttpServer leader(LeaderAnswer);
  const std::string leader_url = leader.url();
  FakeHttpServer standby([&](const FakeRequest& r) { return StandbyAnswer(r, leader_url); });
  const CommandRun run =
      RunCommand(GetParam(), standby.url() + "," + leader.url(), "jobs --json -q main -s running");
  ASSERT_EQ(run.status, 0) << run.output;
  EXPECT_NE(run.output.find("42"), std::string::npos) << run.output;
  ASSERT_EQ(standby.requests().size(), 1u);
  ASSERT_EQ(leader.requests().size(), 1u);
  // The same path and query, and the token, at the leader.
  EXPECT_EQ(leader.requests()[0].target, "/v1/jobs?queue=main&state=running");
  EXPECT_EQ(leader.requests()[0].Header("Authorization"), "Bearer t0k");
}

TEST_P(CommandFollowsTheLeader, PastADeadAddress) {
  FakeHttpServer leader(LeaderAnswer);
  const std::string dead = fmt::format("http://127.0.0.1:{}", FakeHttpServer::ClosedPort());
  const CommandRun run = RunCommand(GetParam(), dead + "," + leader.url(), "jobs --json");
  ASSERT_EQ(run.status, 0) << run.output;
  EXPECT_NE(run.output.find("42"), std::string::npos) << run.output;
  EXPECT_EQ(leader.requests().size(), 1u);
}

TEST_P(CommandFollowsTheLeader, WaitsForALeaderToBeElected) {
  // Both servers are standbys that know no leader for the first 1.5 s; then b leads and a
  // redirects to it.
  const auto start = std::chrono::steady_clock::now();
  auto elected = [start] {
    return std::chrono::steady_clock::now() - start > std::chrono::milliseconds(1500);
  };
  FakeHttpServer b(
      [&](const FakeRequest& r) { return elected() ? LeaderAnswer(r) : StandbyAnswer(r, ""); });
  const std::string b_url = b.url();
  FakeHttpServer a([&](const FakeRequest& r) { return StandbyAnswer(r, elected() ? b_url : ""); });
  const CommandRun run = RunCommand(GetParam(), a.url() + "," + b.url(), "jobs --json");
  ASSERT_EQ(run.status, 0) << run.output;
  EXPECT_NE(run.output.find("42"), std::string::npos) << run.output;
  EXPECT_GE(run.seconds, 1.4);
  EXPECT_LT(run.seconds, 15);
  EXPECT_GE(a.requests().size(), 2u);  // tried again after a wait
}

TEST_P(CommandFollowsTheLeader, FailsNamingEveryAddressWhenNoneLeads) {
  const std::string dead = fmt::format("http://127.0.0.1:{}", FakeHttpServer::ClosedPort());
  FakeHttpServer standby([](const FakeRequest& r) { return StandbyAnswer(r, ""); });
  CommandRun run = RunCommand(GetParam(), dead + "," + standby.url(), "jobs --failover-timeout 1s");
  EXPECT_EQ(run.status, 1) << run.output;
  EXPECT_NE(run.output.find(dead + ": no answer (Connection)"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find(standby.url() + ": standby, no leader known"), std::string::npos)
      << run.output;
  EXPECT_NE(run.output.find("cannot reach the leader of the Arbiter servers " + dead + "," +
                            standby.url() + " within 1s: "),
            std::string::npos)
      << run.output;
  EXPECT_LT(run.seconds, 10);
  EXPECT_GE(standby.requests().size(), 2u);
  // The same from the environment, with every address dead.
  const std::string dead2 = fmt::format("http://127.0.0.1:{}", FakeHttpServer::ClosedPort());
  run = RunCommand(GetParam(), dead + "," + dead2, "queues", "ARBITER_FAILOVER_TIMEOUT=500ms");
  EXPECT_EQ(run.status, 1) << run.output;
  EXPECT_NE(run.output.find(dead + ": no answer"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find(dead2 + ": no answer"), std::string::npos) << run.output;
  EXPECT_LT(run.seconds, 10);
  // One server that is down: one try by default, as before there were several.
  run = RunCommand(GetParam(), dead, "jobs");
  EXPECT_EQ(run.status, 1) << run.output;
  EXPECT_NE(run.output.find("cannot reach the Arbiter server at " + dead +
                            ": no answer (Connection) (start one"),
            std::string::npos)
      << run.output;
  EXPECT_LT(run.seconds, 5);
}

TEST_P(CommandFollowsTheLeader, SubmitsOnceWhenTheConnectionIsLostMidRequest) {
  // The leader takes the first submission and its connection is lost before the answer; the
  // command sends it again (to the next server, which sends it back to the leader) with the same
  // idempotency key, which the leader answers with the first job's id.
  std::mutex mu;
  std::set<std::string> keys;
  int posts = 0;
  FakeHttpServer leader([&](const FakeRequest& r) {
    if (r.method != "POST") return LeaderAnswer(r);
    std::lock_guard lock(mu);
    const Json spec = Json::parse(r.body, nullptr, false);
    const std::string key = spec.value("idempotency_key", "");
    const bool again = keys.count(key) > 0;
    keys.insert(key);
    if (++posts == 1) return DropConnection();
    FakeResponse answer;
    answer.status = again ? 200 : 201;
    answer.body = fmt::format(R"({{"id": {}, "duplicate": {}}})", again ? 7 : 8, again);
    return answer;
  });
  const std::string leader_url = leader.url();
  FakeHttpServer standby([&](const FakeRequest& r) { return StandbyAnswer(r, leader_url); });
  const std::string servers = leader.url() + "," + standby.url();
  CommandRun run = RunCommand(GetParam(), servers, "submit -q main -p low --name x -- /bin/true");
  ASSERT_EQ(run.status, 0) << run.output;
  EXPECT_NE(run.output.find("submitted job 7 (x)"), std::string::npos) << run.output;
  EXPECT_EQ(run.output.find("already submitted"), std::string::npos) << run.output;
  EXPECT_EQ(posts, 2);
  EXPECT_EQ(standby.requests().size(), 1u);
  ASSERT_EQ(keys.size(), 1u);
  EXPECT_EQ(keys.begin()->rfind("arbiter-", 0), 0u) << *keys.begin();
  // Each submission has a key of its own; one the user gives is sent as given.
  run = RunCommand(GetParam(), servers, "submit -q main -p low --name y -- /bin/true");
  ASSERT_EQ(run.status, 0) << run.output;
  EXPECT_NE(run.output.find("submitted job 8 (y)"), std::string::npos) << run.output;
  run = RunCommand(GetParam(), leader.url(),
                   "submit -q main -p low --name z --idempotency-key mine -- /bin/true");
  ASSERT_EQ(run.status, 0) << run.output;
  EXPECT_EQ(keys.size(), 3u);
  EXPECT_EQ(keys.count("mine"), 1u);
}

// A server that accepts connections (the kernel completes them) and never answers: a process
// stopped, or a deposed leader waiting on its database.
class SilentServer {
 public:
  SilentServer() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::listen(fd_, 64);
    socklen_t size = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &size);
    port_ = ntohs(a.sin_port);
  }
  ~SilentServer() { ::close(fd_); }
  SilentServer(const SilentServer&) = delete;
  SilentServer& operator=(const SilentServer&) = delete;
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// A 503 without `leader`, as a leader still recovering or deposed answers.
FakeResponse Unavailable503() {
  FakeResponse r;
  r.status = 503;
  r.body = R"({"error": {"code": "unavailable", "field": "", "message": "not leading now"}})";
  r.headers.emplace_back("Retry-After", "1");
  return r;
}

// The idempotency key of a submission's body.
std::string KeyOf(const FakeRequest& r) {
  return Json::parse(r.body, nullptr, false).value("idempotency_key", "");
}

// The key the command prints in its note on a submission it gave up on.
std::string PrintedKey(const std::string& output) {
  const std::string flag = "--idempotency-key ";
  const std::size_t at = output.find(flag);
  if (at == std::string::npos) return "";
  const std::size_t from = at + flag.size();
  return output.substr(from, output.find(' ', from) - from);
}

TEST_P(CommandFollowsTheLeader, RetriesA503WithoutLeaderWithTheSameKey) {
  // A lone server answers the first submission 503 (its commit cut off, say), then takes the
  // same submission again: the command waits and sends it again with the same key.
  std::mutex mu;
  int posts = 0;
  FakeHttpServer lone([&](const FakeRequest& r) {
    if (r.method != "POST") return LeaderAnswer(r);
    std::lock_guard lock(mu);
    if (++posts == 1) return Unavailable503();
    return LeaderAnswer(r);
  });
  CommandRun run = RunCommand(GetParam(), lone.url(),
                              "submit --failover-timeout 10s -q main -p low --name x -- /bin/true");
  ASSERT_EQ(run.status, 0) << run.output;
  EXPECT_NE(run.output.find("submitted job 7 (x)"), std::string::npos) << run.output;
  std::vector<FakeRequest> requests = lone.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0].body, requests[1].body);
  EXPECT_EQ(KeyOf(requests[0]).rfind("arbiter-", 0), 0u) << requests[0].body;

  // Several servers (15 s by default): a deposed leader's 503 sends the same request to the
  // next, which leads.
  FakeHttpServer deposed([](const FakeRequest&) { return Unavailable503(); });
  FakeHttpServer leader(LeaderAnswer);
  run = RunCommand(GetParam(), deposed.url() + "," + leader.url(),
                   "submit -q main -p low --name y -- /bin/true");
  ASSERT_EQ(run.status, 0) << run.output;
  EXPECT_NE(run.output.find("submitted job 7 (y)"), std::string::npos) << run.output;
  ASSERT_EQ(deposed.requests().size(), 1u);
  ASSERT_EQ(leader.requests().size(), 1u);
  EXPECT_EQ(KeyOf(deposed.requests()[0]), KeyOf(leader.requests()[0]));
  EXPECT_FALSE(KeyOf(leader.requests()[0]).empty());
}

TEST_P(CommandFollowsTheLeader, SubmitThatGivesUpPrintsItsKey) {
  // The server answers 503 until the failover timeout: the command gives up, exits 1, and says
  // the key it sent every time, with which the job is settled afterwards.
  std::mutex mu;
  bool recovered = false;
  std::set<std::string> stored;
  FakeHttpServer lone([&](const FakeRequest& r) {
    if (r.method != "POST") return LeaderAnswer(r);
    std::lock_guard lock(mu);
    const std::string key = KeyOf(r);
    if (!recovered) {
      stored.insert(key);  // stored, but the answer says otherwise (a commit cut off)
      return Unavailable503();
    }
    FakeResponse answer;
    answer.status = stored.count(key) > 0 ? 200 : 201;
    answer.body = fmt::format(R"({{"id": 7, "duplicate": {}}})", stored.count(key) > 0);
    stored.insert(key);
    return answer;
  });
  CommandRun run = RunCommand(GetParam(), lone.url(),
                              "submit --failover-timeout 2s -q main -p low --name x -- /bin/true");
  EXPECT_EQ(run.status, 1) << run.output;
  EXPECT_NE(run.output.find("error: job x: the Arbiter server at " + lone.url() +
                            " did not take the request within 2s: unavailable (HTTP 503): not "
                            "leading now"),
            std::string::npos)
      << run.output;
  EXPECT_NE(run.output.find("note: job x: not acknowledged, and it may have been stored: run the "
                            "same command with --idempotency-key "),
            std::string::npos)
      << run.output;
  const std::string key = PrintedKey(run.output);
  EXPECT_EQ(key.rfind("arbiter-", 0), 0u) << run.output;
  std::vector<FakeRequest> requests = lone.requests();
  ASSERT_GE(requests.size(), 2u);  // sent again within the timeout
  for (const FakeRequest& r : requests) EXPECT_EQ(KeyOf(r), key);
  EXPECT_LT(run.seconds, 20);

  // Settled: the same command with the printed key gets the first job.
  {
    std::lock_guard lock(mu);
    recovered = true;
  }
  run = RunCommand(GetParam(), lone.url(),
                   "submit -q main -p low --name x --idempotency-key " + key + " -- /bin/true");
  ASSERT_EQ(run.status, 0) << run.output;
  EXPECT_NE(run.output.find("submitted job 7 (x): already submitted with this key"),
            std::string::npos)
      << run.output;
  {
    std::lock_guard lock(mu);
    recovered = false;
  }

  // One server and no timeout given: one try, and the key all the same.
  const std::size_t before = lone.requests().size();
  run = RunCommand(GetParam(), lone.url(), "submit -q main -p low --name y -- /bin/true");
  EXPECT_EQ(run.status, 1) << run.output;
  EXPECT_EQ(lone.requests().size(), before + 1);
  EXPECT_EQ(PrintedKey(run.output), KeyOf(lone.requests().back())) << run.output;

  // A server that cannot be reached stored nothing: no note.
  const std::string dead = fmt::format("http://127.0.0.1:{}", FakeHttpServer::ClosedPort());
  run = RunCommand(GetParam(), dead, "submit -q main -p low --name z -- /bin/true");
  EXPECT_EQ(run.status, 1) << run.output;
  EXPECT_NE(run.output.find("cannot reach the Arbiter server at " + dead), std::string::npos)
      << run.output;
  EXPECT_EQ(run.output.find("not acknowledged"), std::string::npos) << run.output;
}

TEST_P(CommandFollowsTheLeader, AHungServerIsPassedWithinTheFailoverTimeout) {
  // A server that accepts and never answers holds a request for as long as the failover
  // timeout, not for the 90 s of a read's own timeout.
  SilentServer hung;
  CommandRun run = RunCommand(GetParam(), hung.url(), "jobs --failover-timeout 2s");
  EXPECT_EQ(run.status, 1) << run.output;
  EXPECT_NE(run.output.find(hung.url() + " within 2s: no answer (Read)"), std::string::npos)
      << run.output;
  EXPECT_LT(run.seconds, 20);

  // Given up on, a submission may have been stored there: its key is said.
  run = RunCommand(GetParam(), hung.url(),
                   "submit --failover-timeout 2s -q main -p low --name x -- /bin/true");
  EXPECT_EQ(run.status, 1) << run.output;
  EXPECT_EQ(PrintedKey(run.output).rfind("arbiter-", 0), 0u) << run.output;
  EXPECT_LT(run.seconds, 20);

  // Before the leader in the list: passed for it.
  FakeHttpServer leader(LeaderAnswer);
  run =
      RunCommand(GetParam(), hung.url() + "," + leader.url(), "jobs --json --failover-timeout 2s");
  ASSERT_EQ(run.status, 0) << run.output;
  EXPECT_NE(run.output.find("42"), std::string::npos) << run.output;
  EXPECT_EQ(leader.requests().size(), 1u);
  EXPECT_LT(run.seconds, 20);
}

INSTANTIATE_TEST_SUITE_P(FrontAndWholeProgram, CommandFollowsTheLeader,
                         ::testing::Values(std::string(ARBITER_BINARY), WholeProgram()),
                         [](const auto& param) { return param.index == 0 ? "front" : "whole"; });

}  // namespace
}  // namespace arbiter::testing
