// A real `arbiter agent` given two servers that stand in for a leader and a standby
// (tests/testing/fake_http.h): it follows the standby's redirect to the leader, ignores the
// answers of a deposed leader (a lower epoch) without stopping its task, and when the other
// server takes over (a higher epoch, which wants a registration and then answers the whole set)
// it adopts its running task rather than starting it again. A 503 without a leader (a server still
// recovering, a deposed leader) is not final: the agent moves on, or asks again.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "agent/agent_process.h"
#include "testing/fake_http.h"

namespace arbiter::testing {
namespace {

constexpr const char* kKey = "1.0.100";

int CountOccurrences(const std::string& text, const std::string& what) {
  int n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The reported state of the test's task in a sync body: 1 running, 0 ended, -1 not reported.
int Reported(const FakeRequest& r) {
  const Json body = Json::parse(r.body, nullptr, false);
  if (!body.is_object() || !body.contains("tasks")) return -1;
  for (const Json& t : body["tasks"]) {
    if (t.value("job", 0) == 1 && t.value("run", 0) == 100) return t.value("running", false);
  }
  return -1;
}

// The requests that report tasks, for a failure's message.
std::string Reporting(const std::vector<FakeRequest>& requests) {
  std::string out;
  for (const FakeRequest& r : requests) {
    if (r.body.find(R"("tasks":[])") == std::string::npos) out += r.target + " " + r.body + "\n";
  }
  return out;
}

TEST(AgentFollowsTheLeader, RedirectLowerEpochAndTakeover) {
  TempDir dir;
  const std::string starts = (dir.path() / "starts").string();
  const Json task = {{"key", kKey},
                     {"job", 1},
                     {"rank", 0},
                     {"run", 100},
                     {"argv",
                      {"/bin/sh", "-c",
                       "echo started >> " + starts + "; trap 'echo stopped >> " + starts +
                           "; exit 0' TERM; while true; do sleep 0.1; done"}},
                     {"devices", Json::array()},
                     {"env", Json::object()}};
  auto registered = [](std::uint64_t epoch) {
    return FakeResponse{200,
                        Json{{"node", "n0"},
                             {"sync_wait_ms", 100},
                             {"node_lost_timeout_ms", 30000},
                             {"kill_after_ms", 1000},
                             {"checkpoint_root", ""},
                             {"credential", "node-credential-0"},
                             {"log_token", "log-token-0"},
                             {"epoch", epoch}}
                            .dump(),
                        {}};
  };
  auto sync = [](std::uint64_t epoch, Json tasks) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // a long poll, shortened
    return FakeResponse{200,
                        Json{{"revision", fmt::format("{}.1", epoch)},
                             {"full", true},
                             {"now_ms", 0},
                             {"tasks", std::move(tasks)},
                             {"removed", Json::array()},
                             {"epoch", epoch}}
                            .dump(),
                        {}};
  };

  // 1: b leads (epoch 5), a redirects to it. 2: b answers as a deposed leader (epoch 3, with no
  // task: applied, it would stop the task), three times. 3: b is gone; a leads (epoch 6). 4: a
  // takes the task off the node.
  std::mutex mu;
  int phase = 1, stale_answers = 0, adopted_reports = 0;
  bool a_registered = false;
  std::string a_url;
  FakeHttpServer b([&](const FakeRequest& r) {
    std::unique_lock lock(mu);
    if (phase >= 3) return DropConnection();
    if (r.target.find("/register") != std::string::npos) return registered(5);
    if (phase == 1) {
      if (Reported(r) == 1) phase = 2;
      lock.unlock();
      return sync(5, Json::array({task}));
    }
    if (++stale_answers == 3) phase = 3;
    lock.unlock();
    return sync(3, Json::array());
  });
  const std::string b_url = b.url();
  FakeHttpServer a([&](const FakeRequest& r) {
    std::unique_lock lock(mu);
    if (phase < 3) return StandbyAnswer(r, b_url);
    if (r.target.find("/register") != std::string::npos) {
      a_registered = true;
      return registered(6);
    }
    if (!a_registered) {
      return FakeResponse{
          409, R"({"error": {"code": "conflict", "field": "", "message": "register first"}})", {}};
    }
    const int reported = Reported(r);
    const bool keep = phase == 3;
    // The task reported running to the new leader (every task is, after a registration): a
    // whole set with it (adopted, not started), then one without it.
    if (phase == 3 && reported == 1) {
      ++adopted_reports;
      phase = 4;
    }
    lock.unlock();
    return sync(6, keep ? Json::array({task}) : Json::array());
  });
  a_url = a.url();

  const std::string work = (dir.path() / "agent").string();
  {
    AgentProcess agent(a.url() + "," + b.url(), "join-token-0", "n0", "none", work);
    // Stopped when a leaves it out (its end is not reported: the server no longer lists it).
    EXPECT_TRUE(WaitFor([&] { return ReadAll(starts).find("stopped") != std::string::npos; }))
        << ReadAll(work + ".out") << Reporting(a.requests());
  }
  const std::string out = ReadAll(work + ".out");
  // Started once, kept through the deposed leader's answers and the takeover.
  EXPECT_EQ(CountOccurrences(ReadAll(starts), "started"), 1) << out;
  EXPECT_EQ(CountOccurrences(out, "task " + std::string(kKey) + " started"), 1) << out;
  // The deposed leader's answers are said once, and not applied.
  EXPECT_EQ(CountOccurrences(out, b_url + " answered the sync with epoch 3, below 5"), 1) << out;
  {
    std::lock_guard lock(mu);  // written by the stand-in servers' threads
    EXPECT_EQ(adopted_reports, 1);
  }
  EXPECT_NE(out.find(b_url + " leads (epoch 5)"), std::string::npos) << out;
  EXPECT_NE(out.find(a_url + " leads (epoch 6)"), std::string::npos) << out;
  EXPECT_NE(out.find("registered node n0 with " + a_url), std::string::npos) << out;
  // The first registration went to a, which sent it to b with the join token.
  const std::vector<FakeRequest> to_a = a.requests();
  ASSERT_FALSE(to_a.empty());
  EXPECT_EQ(to_a[0].target, "/v1/nodes/n0/register");
  const std::vector<FakeRequest> to_b = b.requests();
  ASSERT_FALSE(to_b.empty());
  EXPECT_EQ(to_b[0].target, "/v1/nodes/n0/register");
  EXPECT_EQ(to_b[0].Header("Authorization"), "Bearer join-token-0");
  // a's registration used the node's credential b gave.
  int with_credential = 0;
  for (const FakeRequest& r : to_a) {
    with_credential += r.target == "/v1/nodes/n0/register" &&
                       r.Header("Authorization") == "Bearer node-credential-0";
  }
  EXPECT_EQ(with_credential, 1);
}

// A registration's answer of a leader of `epoch`, whose syncs wait 100 ms.
FakeResponse Registered(std::uint64_t epoch) {
  return FakeResponse{200,
                      Json{{"node", "n0"},
                           {"sync_wait_ms", 100},
                           {"node_lost_timeout_ms", 30000},
                           {"kill_after_ms", 1000},
                           {"checkpoint_root", ""},
                           {"credential", "node-credential-0"},
                           {"log_token", "log-token-0"},
                           {"epoch", epoch}}
                          .dump(),
                      {}};
}

// A sync's answer with no task.
FakeResponse Synced(std::uint64_t epoch) {
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // a long poll, shortened
  return FakeResponse{200,
                      Json{{"revision", fmt::format("{}.1", epoch)},
                           {"full", true},
                           {"now_ms", 0},
                           {"tasks", Json::array()},
                           {"removed", Json::array()},
                           {"epoch", epoch}}
                          .dump(),
                      {}};
}

// 503 without `leader`, as a server still recovering, or deposed, answers.
FakeResponse Unavailable() {
  return FakeResponse{
      503,
      R"({"error": {"code": "unavailable", "field": "", "message": "not leading now"}})",
      {{"Retry-After", "1"}}};
}

TEST(AgentFollowsTheLeader, PassesAServerAnswering503WithoutLeader) {
  // a answers every request 503 without naming a leader; b leads. The agent registers and
  // syncs with b rather than taking a's answer as final (and asking a alone again and again).
  TempDir dir;
  FakeHttpServer a([](const FakeRequest&) { return Unavailable(); });
  FakeHttpServer b([](const FakeRequest& r) {
    if (r.target.find("/register") != std::string::npos) return Registered(5);
    return Synced(5);
  });
  const std::string work = (dir.path() / "agent").string();
  AgentProcess agent(a.url() + "," + b.url(), "join-token-0", "n0", "none", work);
  EXPECT_TRUE(WaitFor([&] {
    int syncs = 0;
    for (const FakeRequest& r : b.requests()) syncs += r.target.find("/sync") != std::string::npos;
    return syncs >= 3;
  })) << ReadAll(work + ".out");
  const std::string out = ReadAll(work + ".out");
  EXPECT_NE(out.find("registered node n0 with " + b.url()), std::string::npos) << out;
  ASSERT_FALSE(a.requests().empty());
  EXPECT_EQ(a.requests()[0].target, "/v1/nodes/n0/register");
}

TEST(AgentFollowsTheLeader, AsksItsOnlyServerAgainAfterA503WithoutLeader) {
  // One server, that answers its first registration and its first two syncs 503: the agent asks
  // again (the same request) until it is answered.
  TempDir dir;
  std::mutex mu;
  int registrations = 0, syncs = 0;
  FakeHttpServer lone([&](const FakeRequest& r) {
    std::unique_lock lock(mu);
    if (r.target.find("/register") != std::string::npos) {
      return ++registrations == 1 ? Unavailable() : Registered(5);
    }
    if (++syncs <= 2) return Unavailable();
    lock.unlock();
    return Synced(5);
  });
  const std::string work = (dir.path() / "agent").string();
  AgentProcess agent(lone.url(), "join-token-0", "n0", "none", work);
  EXPECT_TRUE(WaitFor([&] {
    std::lock_guard lock(mu);
    return syncs >= 4;
  })) << ReadAll(work + ".out");
  const std::string out = ReadAll(work + ".out");
  EXPECT_NE(out.find("registered node n0 with " + lone.url()), std::string::npos) << out;
  EXPECT_NE(out.find(lone.url() + ": unavailable (HTTP 503): not leading now"), std::string::npos)
      << out;
  // The 503s' requests were sent again, not given up on: registered once, the syncs answered.
  const std::vector<FakeRequest> requests = lone.requests();
  ASSERT_GE(requests.size(), 6u);
  EXPECT_EQ(requests[0].target, requests[1].target);
  EXPECT_EQ(requests[2].target, requests[3].target);
  EXPECT_EQ(requests[2].body, requests[3].body);
}

}  // namespace
}  // namespace arbiter::testing
