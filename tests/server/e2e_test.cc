// End to end: a real server process on a loopback port, driven through its API and the arbiter
// command. Scheduling on virtual nodes, preemption by priority, cancel, explain, authentication
// and every kind of bad input; restarts and a kill -9 while clients submit.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "server/server_process.h"

namespace arbiter::testing {
namespace {

constexpr const char* kAdmin = "admin-token-0001";
constexpr const char* kAlice = "alice-token-0001";
constexpr const char* kBob = "bob-token-000001";
constexpr const char* kAgent = "agent-token-0001";

// Two nodes of four GPUs; `high` may evict `low` (1 s grace period).
std::string ClusterYaml(int max_jobs_per_user) {
  return R"(
priority_classes:
  - {name: high, value: 100, preemptible: false}
  - {name: low, value: 10, grace_period: 1s}
queues:
  - {name: main}
  - {name: other}
nodes:
  - name: g-{i}
    count: 2
    gpus: {model: G, count: 4, memory: 40Gi}
    cpu: 32
    memory: 256Gi
server:
  tokens:
    - {name: admin, token: admin-token-0001, role: admin}
    - {name: alice, token: alice-token-0001, role: user, queues: [main], priority_classes: [low]}
    - {name: bob, token: bob-token-000001, role: user, queues: [main], priority_classes: [low]}
    - {name: agent, token: agent-token-0001, role: agent}
  cycle_min_interval: 20ms
  cycle_period: 500ms
  max_active_jobs_per_user: )" +
         std::to_string(max_jobs_per_user) + R"(
  max_body_bytes: 4096
)";
}

std::string Job(const std::string& name, const std::string& cls, int tasks, int gpu_milli,
                int runtime_ms, const std::string& queue = "main") {
  return Json{{"name", name},
              {"queue", queue},
              {"priority_class", cls},
              {"runtime_estimate_ms", runtime_ms},
              {"groups", Json::array({{{"tasks", tasks}, {"gpu_milli", gpu_milli}}})}}
      .dump();
}

class ServerTest : public ::testing::Test {
 protected:
  void Start(int max_jobs_per_user = 5, const std::string& more_server_fields = "") {
    config_ = dir_.Write("cluster.yaml", ClusterYaml(max_jobs_per_user) + more_server_fields);
    server_.emplace(config_, (dir_.path() / "data").string());
    ASSERT_TRUE(server_->ready()) << "the server did not start";
  }
  int port() const { return server_->port(); }
  std::uint64_t Submit(const std::string& token, const std::string& body) {
    Reply r = Call(port(), token, "POST", "/v1/jobs", body);
    EXPECT_EQ(r.status, 201) << r.body.dump();
    return r.status == 201 ? r.body["id"].get<std::uint64_t>() : 0;
  }
  Json GetJob(std::uint64_t id) {
    return Call(port(), kAdmin, "GET", "/v1/jobs/" + std::to_string(id)).body;
  }
  std::string State(std::uint64_t id) { return GetJob(id)["status"].value("state", "?"); }
  bool WaitState(std::uint64_t id, const std::string& state) {
    return WaitFor([&] { return State(id) == state; });
  }
  // The lines of the server's snapshot (`GET /v1/admin/snapshot`) that hold `text`, each with
  // the `after` lines that follow it.
  std::vector<std::string> SnapshotLines(const std::string& text, int after = 0) {
    httplib::Client client("127.0.0.1", port());
    auto res =
        client.Get("/v1/admin/snapshot", {{"Authorization", std::string("Bearer ") + kAdmin}});
    std::vector<std::string> lines;
    if (!res) return lines;
    std::istringstream body(res->body);
    int more = 0;
    for (std::string line; std::getline(body, line);) {
      if (line.find(text) != std::string::npos) {
        more = after + 1;
      }
      if (more > 0) {
        lines.push_back(line);
        --more;
      }
    }
    return lines;
  }

  TempDir dir_;
  std::string config_;
  std::optional<ServerProcess> server_;
};

TEST_F(ServerTest, SighupRotatesTokensWithoutARestart) {
  Start();
  ASSERT_EQ(Call(port(), kBob, "GET", "/v1/jobs").status, 200);
  const std::uint64_t id = Submit(kAlice, Job("kept", "low", 1, 1000, 60000));
  // Bob's token is replaced by a new one; the file is read again on SIGHUP.
  std::string yaml = ClusterYaml(5);
  const std::string old_line = "token: bob-token-000001";
  yaml.replace(yaml.find(old_line), old_line.size(), "token: bob-token-rotated-2");
  dir_.Write("cluster.yaml", yaml);
  ::kill(server_->pid(), SIGHUP);
  EXPECT_TRUE(WaitFor([&] { return Call(port(), kBob, "GET", "/v1/jobs").status == 401; }));
  EXPECT_EQ(Call(port(), "bob-token-rotated-2", "GET", "/v1/jobs").status, 200);
  EXPECT_EQ(Call(port(), kAlice, "GET", "/v1/jobs").status, 200);
  // Nothing else changed: no restart (the job starts in its cycle, which a loaded machine may
  // run after the tokens were read).
  EXPECT_TRUE(WaitState(id, "running")) << State(id);
  // A file that does not load keeps the tokens in use.
  dir_.Write("cluster.yaml", "queues: [");
  ::kill(server_->pid(), SIGHUP);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(Call(port(), "bob-token-rotated-2", "GET", "/v1/jobs").status, 200);
  EXPECT_EQ(Call(port(), kBob, "GET", "/v1/jobs").status, 401);
}

TEST_F(ServerTest, SubmitWithTheCommandScheduleAndCompleteOnVirtualNodes) {
  Start();
  CommandResult submit = RunCli(server_->address(), kAlice,
                                "submit -q main -p low -n 2 -g 2 -r 3s --checkpoint-interval 500ms "
                                "--name hello -- echo hi");
  ASSERT_EQ(submit.status, 0) << submit.output;
  EXPECT_NE(submit.output.find("submitted job 1 (hello)"), std::string::npos) << submit.output;
  ASSERT_TRUE(WaitState(1, "completed")) << GetJob(1).dump();
  const Json job = GetJob(1);
  EXPECT_EQ(job["spec"]["user"], "alice");                      // the submitter, from the token
  EXPECT_EQ(job["spec"]["argv"], Json::array({"echo", "hi"}));  // exec form: no shell
  CommandResult jobs = RunCli(server_->address(), kAlice, "jobs");
  EXPECT_EQ(jobs.status, 0);
  EXPECT_NE(jobs.output.find("hello"), std::string::npos) << jobs.output;
  EXPECT_NE(jobs.output.find("completed"), std::string::npos) << jobs.output;
  CommandResult listing = RunCli(server_->address(), kAlice, "jobs --json --state completed");
  EXPECT_EQ(Json::parse(listing.output, nullptr, false).size(), 1u) << listing.output;
  // A job file, as in a jobs file.
  const std::string file = dir_.Write("job.yaml", R"(
name: from-file
queue: main
priority_class: low
tasks: 1
gpus: 500m
runtime_estimate: 1h
checkpoint_interval: 10m
command: python serve.py
)");
  CommandResult from_file = RunCli(server_->address(), kAlice, "submit -f " + file);
  ASSERT_EQ(from_file.status, 0) << from_file.output;
  const Json second = GetJob(2);
  EXPECT_EQ(second["spec"]["name"], "from-file");
  EXPECT_EQ(second["spec"]["groups"][0]["gpu_milli"], 500);
  EXPECT_EQ(second["spec"]["checkpoint_interval_ms"], 600000);
  CommandResult bad_file = RunCli(server_->address(), kAlice,
                                  "submit -f " + dir_.Write("bad.yaml", "name: x\ncolour: red\n"));
  EXPECT_EQ(bad_file.status, 2);
  EXPECT_NE(bad_file.output.find("colour: unknown field"), std::string::npos) << bad_file.output;
  // Every transition is an event.
  Reply events = Call(port(), kAlice, "GET", "/v1/events?cursor=0");
  std::vector<std::string> kinds;
  for (const Json& e : events.body["events"]) {
    if (e["job"] == 1) kinds.push_back(e["kind"]);
  }
  // It checkpointed on its virtual nodes every 500 ms of its 3 s.
  ASSERT_GE(kinds.size(), 4u);
  EXPECT_EQ(kinds.front(), "submitted");
  EXPECT_EQ(kinds[1], "started");
  EXPECT_EQ(kinds.back(), "completed");
  EXPECT_EQ(std::count(kinds.begin(), kinds.end(), "checkpointed"),
            static_cast<std::ptrdiff_t>(kinds.size() - 3));
}

TEST_F(ServerTest, HighPriorityEvictsLowAfterItsGracePeriod) {
  Start();
  const std::uint64_t a = Submit(kAdmin, Job("low-a", "low", 1, 4000, 3600000));
  const std::uint64_t b = Submit(kAdmin, Job("low-b", "low", 1, 4000, 3600000));
  ASSERT_TRUE(WaitState(a, "running"));
  ASSERT_TRUE(WaitState(b, "running"));
  const std::uint64_t high = Submit(kAdmin, Job("urgent", "high", 1, 4000, 3600000));
  ASSERT_TRUE(WaitState(high, "running")) << GetJob(high).dump();
  // One victim was signalled, stopped after its grace period and is pending again.
  ASSERT_TRUE(WaitFor([&] {
    return GetJob(a)["status"].contains("evictions_ms") ||
           GetJob(b)["status"].contains("evictions_ms");
  }));
  const std::uint64_t victim = GetJob(a)["status"].contains("evictions_ms") ? a : b;
  EXPECT_TRUE(WaitState(victim, "pending"));
  EXPECT_NE(GetJob(victim).value("reason", "").find("0/2 nodes fit"), std::string::npos)
      << GetJob(victim).dump();
  Reply events = Call(port(), kAdmin, "GET", "/v1/events?cursor=0&limit=100");
  std::vector<std::string> kinds;
  for (const Json& e : events.body["events"]) {
    if (e["job"] == victim) kinds.push_back(e["kind"]);
  }
  EXPECT_EQ(kinds,
            (std::vector<std::string>{"submitted", "started", "eviction_signalled", "evicted"}));
  Reply metrics;
  httplib::Client client("127.0.0.1", port());
  auto res = client.Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_NE(
      res->body.find(
          "arbiter_evicted_jobs_total{class=\"low\",queue=\"main\",reason=\"within_queue\"} 1"),
      std::string::npos)
      << res->body;
  EXPECT_NE(res->body.find("arbiter_queue_pending_jobs{queue=\"main\",reason=\"filter\"} 1"),
            std::string::npos);
  EXPECT_NE(res->body.find("arbiter_allocated_gpus{gpu_type=\"G\"} 8"), std::string::npos);
  EXPECT_NE(res->body.find("arbiter_admission_wait_time_seconds_count{queue=\"main\"} 3"),
            std::string::npos);
  EXPECT_NE(res->body.find("arbiter_cycle_duration_seconds_bucket"), std::string::npos);
  EXPECT_NE(res->body.find("arbiter_submit_duration_seconds_count 3"), std::string::npos);
  // A long poll from the end of the stream answers with the next event.
  const std::uint64_t cursor = events.body["cursor"];
  std::thread later([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    Call(port(), kAdmin, "DELETE", "/v1/jobs/" + std::to_string(high));
  });
  Reply next = Call(port(), kAdmin, "GET", "/v1/events?wait=30&cursor=" + std::to_string(cursor));
  later.join();
  ASSERT_EQ(next.status, 200);
  ASSERT_FALSE(next.body["events"].empty()) << next.body.dump();
  EXPECT_GT(next.body["cursor"].get<std::uint64_t>(), cursor);
  // Server-sent events: from the start, then a new one as it is committed.
  std::string stream;
  std::thread submitter([&] {
    WaitFor([&] { return Call(port(), kAdmin, "GET", "/v1/jobs").status == 200; });
    Submit(kAdmin, Job("streamed", "low", 1, 1000, 1000));
  });
  httplib::Client client_sse("127.0.0.1", port());
  client_sse.set_read_timeout(std::chrono::seconds(60));
  auto sse = client_sse.Get(
      "/v1/events/stream?cursor=0", {{"Authorization", std::string("Bearer ") + kAdmin}},
      [&](const char* data, size_t length) {
        stream.append(data, length);
        // Stop once the new job's submission has come through.
        return stream.find("\"job\":4,\"kind\":\"submitted\"") == std::string::npos;
      });
  submitter.join();
  EXPECT_NE(stream.find("id: 1\nevent: submitted\ndata: {"), std::string::npos) << stream;
  EXPECT_NE(stream.find("event: eviction_signalled"), std::string::npos) << stream;
  EXPECT_NE(stream.find("\"job\":4,\"kind\":\"submitted\""), std::string::npos) << stream;
}

// Gavel's rounds through the server (policy gavel, one-second rounds): three jobs of a whole node
// on two nodes take turns, the waiting one evicting, at the end of a round, a runner that has had
// more of its share.
TEST_F(ServerTest, GavelsRoundsTakeTurnsOnTheGpus) {
  Start(5,
        "scheduler:\n"
        "  ordering: {policy: gavel, heterogeneity: max-min-fairness, gavel_round: 1s}\n"
        "  preemption: {enabled: true}\n");
  std::vector<std::uint64_t> jobs;
  for (const char* name : {"turn-a", "turn-b", "turn-c"})
    jobs.push_back(Submit(kAdmin, Job(name, "low", 1, 4000, 3600000)));
  // Every job has started, and one has started twice (its turn came back).
  auto starts = [&](std::uint64_t job) {
    int n = 0;
    const Reply events = Call(port(), kAdmin, "GET", "/v1/events?cursor=0&limit=100");
    for (const Json& e : events.body["events"]) n += e["job"] == job && e["kind"] == "started";
    return n;
  };
  ASSERT_TRUE(WaitFor([&] {
    int twice = 0;
    for (std::uint64_t job : jobs) {
      const int n = starts(job);
      if (n == 0) return false;
      twice += n >= 2;
    }
    return twice > 0;
  })) << Call(port(), kAdmin, "GET", "/v1/events?cursor=0&limit=30").body.dump();
  httplib::Client client("127.0.0.1", port());
  auto res = client.Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_NE(res->body.find("reason=\"allocation_round\""), std::string::npos) << res->body;
}

// Under least attained service the server counts each job's service from its runs, and a restart
// counts it again from the store's events: the job that ran past the threshold before it was
// evicted keeps its service (the snapshot's `service` line, to the millisecond) and so stays
// behind the job that evicted it, both in the second service queue.
TEST_F(ServerTest, AttainedServiceOutlivesARestart) {
  Start(5,
        "scheduler:\n"
        "  ordering: {policy: las, las_thresholds: [1s]}\n"
        "  preemption: {enabled: true}\n");
  const std::uint64_t first = Submit(kAdmin, Job("first", "low", 2, 4000, 3600000));
  ASSERT_TRUE(WaitState(first, "running"));
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // into the second queue
  const std::uint64_t second = Submit(kAdmin, Job("second", "low", 2, 4000, 3600000));
  ASSERT_TRUE(WaitState(second, "running"));
  ASSERT_TRUE(WaitState(first, "pending"));  // evicted by `second`, after its grace period
  // The service lines of the snapshot (only `first` has run and stopped).
  auto service = [&] { return SnapshotLines("service: {"); };
  const std::vector<std::string> before = service();
  ASSERT_EQ(before.size(), 1u);
  EXPECT_NE(before[0].find("time_on_model: {"), std::string::npos) << before[0];
  EXPECT_EQ(server_->Stop(SIGTERM), 0);
  server_.emplace(config_, (dir_.path() / "data").string());
  ASSERT_TRUE(server_->ready());
  EXPECT_EQ(service(), before);
  // Counted from zero, `first` would be in the first queue and evict `second` once `second` has
  // run past the threshold (1 s), after its grace period (1 s).
  std::this_thread::sleep_for(std::chrono::milliseconds(3500));
  EXPECT_EQ(State(second), "running");
  EXPECT_EQ(State(first), "pending");
}

// A Gittins order learns the sizes of the jobs that completed; a restart learns them again from
// the store's events, in the same order.
TEST_F(ServerTest, GittinsSizesOutliveARestart) {
  Start(5,
        "scheduler:\n"
        "  ordering: {policy: gittins, las_thresholds: [1s]}\n"
        "  preemption: {enabled: true}\n");
  const std::uint64_t a = Submit(kAdmin, Job("short", "low", 1, 1000, 200));
  const std::uint64_t b = Submit(kAdmin, Job("longer", "low", 2, 1000, 400));
  ASSERT_TRUE(WaitState(a, "completed"));
  ASSERT_TRUE(WaitState(b, "completed"));
  const std::vector<std::string> before = SnapshotLines("finished_service", 1);
  ASSERT_EQ(before.size(), 2u) << "the key and the sizes";
  EXPECT_EQ(server_->Stop(SIGTERM), 0);
  server_.emplace(config_, (dir_.path() / "data").string());
  ASSERT_TRUE(server_->ready());
  EXPECT_EQ(SnapshotLines("finished_service", 1), before);
}

TEST_F(ServerTest, ExplainCancelHoldAndPriority) {
  Start();
  const std::uint64_t big = Submit(kAlice, Job("big", "low", 2, 4000, 3600000));
  ASSERT_TRUE(WaitState(big, "running"));
  const std::uint64_t waiting = Submit(kAlice, Job("waiting", "low", 1, 1000, 1000));
  ASSERT_TRUE(WaitFor(
      [&] { return GetJob(waiting).value("reason", "").find("nodes fit") != std::string::npos; }));
  CommandResult explain = RunCli(server_->address(), kAlice, "explain " + std::to_string(waiting));
  EXPECT_EQ(explain.status, 0);
  EXPECT_NE(explain.output.find("pending: filter: 0/2 nodes fit: 2 insufficient GPU"),
            std::string::npos)
      << explain.output;
  // Times print in ISO 8601 UTC, in the reason as in the command's own lines, never as epoch
  // numbers.
  const std::string iso = "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]{3})?Z";
  EXPECT_TRUE(std::regex_search(explain.output, std::regex("submitted at " + iso + " \\(")))
      << explain.output;
  EXPECT_FALSE(std::regex_search(explain.output, std::regex("[0-9]{9}"))) << explain.output;
  const Json pending = GetJob(waiting);
  if (pending.contains("reserved_start_ms")) {
    EXPECT_TRUE(std::regex_match(pending["reserved_start"].get<std::string>(), std::regex(iso)))
        << pending.dump();
    EXPECT_NE(pending["reason"].get<std::string>().find(
                  "expected to start at " + pending["reserved_start"].get<std::string>()),
              std::string::npos)
        << pending.dump();
  }
  CommandResult running = RunCli(server_->address(), kAlice, "job " + std::to_string(big));
  EXPECT_EQ(running.status, 0);
  EXPECT_TRUE(std::regex_search(running.output, std::regex("  started at " + iso + " \\(")))
      << running.output;
  EXPECT_TRUE(
      std::regex_search(running.output, std::regex("expected to end at " + iso +
                                                   " \\(in [0-9hms]+\\) by its runtime estimate "
                                                   "\\(1h00m00s\\)")))
      << running.output;
  EXPECT_FALSE(std::regex_search(running.output, std::regex("[0-9]{9}"))) << running.output;
  // Bob may not touch Alice's job; Alice may not give it a class her token does not list, and
  // may hold it.
  EXPECT_EQ(Call(port(), kBob, "POST", "/v1/jobs/" + std::to_string(waiting) + "/cancel").status,
            403);
  EXPECT_EQ(Call(port(), kAlice, "PATCH", "/v1/jobs/" + std::to_string(waiting),
                 R"({"priority_class": "high"})")
                .status,
            403);
  EXPECT_EQ(Call(port(), kAlice, "POST", "/v1/jobs/" + std::to_string(waiting) + "/hold").status,
            200);
  EXPECT_EQ(State(waiting), "held");
  EXPECT_EQ(Call(port(), kAlice, "POST", "/v1/jobs/" + std::to_string(waiting) + "/release").status,
            403);
  EXPECT_EQ(Call(port(), kAdmin, "POST", "/v1/jobs/" + std::to_string(waiting) + "/release").status,
            200);
  EXPECT_EQ(Call(port(), kAdmin, "PATCH", "/v1/jobs/" + std::to_string(waiting),
                 R"({"priority_class": "high"})")
                .status,
            200);
  EXPECT_EQ(GetJob(waiting)["status"]["priority_class"], "high");
  // Cancel with the command: a running job frees its devices.
  CommandResult cancel = RunCli(server_->address(), kAlice, "cancel " + std::to_string(big));
  EXPECT_EQ(cancel.status, 0) << cancel.output;
  EXPECT_EQ(State(big), "cancelled");
  EXPECT_TRUE(WaitState(waiting, "completed"));
  EXPECT_EQ(Call(port(), kAlice, "DELETE", "/v1/jobs/" + std::to_string(big)).status, 409);
  EXPECT_EQ(Call(port(), kAlice, "DELETE", "/v1/jobs/999").status, 404);
}

// A user's active jobs may ask at most server.max_active_gpus_per_user GPUs together; a finished
// job gives its GPUs back.
TEST_F(ServerTest, AUsersActiveJobsAskAtMostItsGpus) {
  Start(100, "  max_active_gpus_per_user: 6\n");
  const std::uint64_t four = Submit(kAlice, Job("four", "low", 2, 2000, 3600000));
  Submit(kAlice, Job("half", "low", 1, 500, 3600000));
  Reply over = Call(port(), kAlice, "POST", "/v1/jobs", Job("two", "low", 1, 2000, 1000));
  EXPECT_EQ(over.status, 409) << over.body.dump();
  EXPECT_EQ(over.body["error"]["field"], "user");
  EXPECT_NE(over.body["error"]["message"].get<std::string>().find("ask 4.5 GPUs; this one's 2"),
            std::string::npos)
      << over.body.dump();
  Submit(kBob, Job("bobs", "low", 1, 2000, 1000));   // another user's share
  Submit(kAlice, Job("one", "low", 1, 1000, 1000));  // 5.5 in all
  EXPECT_EQ(Call(port(), kAlice, "DELETE", "/v1/jobs/" + std::to_string(four)).status, 200);
  Submit(kAlice, Job("two", "low", 1, 2000, 1000));
}

TEST_F(ServerTest, AuthenticationAndRoles) {
  Start();
  const std::string job = Job("j", "low", 1, 1000, 1000);
  EXPECT_EQ(Call(port(), "", "POST", "/v1/jobs", job).status, 401);
  EXPECT_EQ(Call(port(), "not-a-token", "POST", "/v1/jobs", job).status, 401);
  EXPECT_EQ(Call(port(), "", "GET", "/v1/jobs").status, 401);
  EXPECT_EQ(Call(port(), kAgent, "POST", "/v1/jobs", job).status, 403);
  Reply other = Call(port(), kAlice, "POST", "/v1/jobs", Job("j", "low", 1, 1000, 1000, "other"));
  EXPECT_EQ(other.status, 403);
  EXPECT_EQ(other.body["error"]["field"], "queue");
  EXPECT_EQ(Call(port(), kAlice, "POST", "/v1/nodes/g-0/cordon").status, 403);
  EXPECT_EQ(
      Call(port(), kAlice, "PUT", "/v1/queues/main/quota", R"({"G": {"nominal_milli": 1000}})")
          .status,
      403);
  // The command says so too.
  CommandResult denied = RunCli(server_->address(), "wrong-token", "jobs");
  EXPECT_EQ(denied.status, 1);
  EXPECT_NE(denied.output.find("HTTP 401"), std::string::npos) << denied.output;
  // Admin may do all of it.
  EXPECT_EQ(
      Call(port(), kAdmin, "POST", "/v1/jobs", Job("j", "low", 1, 1000, 1000, "other")).status,
      201);
  CommandResult cordon = RunCli(server_->address(), kAdmin, "cordon g-0 --reason repair");
  EXPECT_EQ(cordon.status, 0) << cordon.output;
  CommandResult nodes = RunCli(server_->address(), kAdmin, "nodes --json");
  const Json list = Json::parse(nodes.output, nullptr, false);
  ASSERT_TRUE(list.is_array()) << nodes.output;
  EXPECT_EQ(list[0]["state"], "cordoned");
  EXPECT_EQ(
      Call(port(), kAdmin, "PUT", "/v1/queues/main/quota", R"({"G": {"nominal_milli": 4000}})")
          .status,
      200);
  CommandResult queues = RunCli(server_->address(), kAdmin, "queues");
  EXPECT_NE(queues.output.find("G 0/4/-"), std::string::npos) << queues.output;
  // Health and readiness need no token.
  EXPECT_EQ(Call(port(), "", "GET", "/healthz").status, 200);
  EXPECT_EQ(Call(port(), "", "GET", "/readyz").status, 200);
}

TEST_F(ServerTest, EveryBadInputIsRefusedNamingTheFieldAndLosesNothing) {
  Start(/*max_jobs_per_user=*/3);
  const std::uint64_t kept = Submit(kAlice, Job("kept", "low", 1, 1000, 3600000));
  struct Case {
    std::string body, field;
    int status = 400;
    std::string code = "invalid_argument";
  };
  const std::string big(5000, 'x');
  const std::vector<Case> cases = {
      {"{\"name\": ", "body"},  // malformed JSON
      {"[1, 2]", "body"},       // not an object
      {R"({"name": "x", "queue": "main", "priority_class": "low", "groups": [{}], "colour": 1})",
       "colour"},                                                 // unknown field
      {Job("x", "low", 0, 1000, 1000), "groups[0].tasks"},        // zero count
      {Job("x", "low", -2, 1000, 1000), "groups[0].tasks"},       // negative count
      {Job("x", "low", 1, -1000, 1000), "groups[0].gpu_milli"},   // negative GPUs
      {Job("x", "low", 1, 1500, 1000), "groups[0].gpu_milli"},    // a fraction above 1000
      {Job("x", "low", 2000000, 1000, 1000), "groups[0].tasks"},  // above the limit
      {Job("x", "low", 1, 1000, 1000, "nowhere"), "queue", 404, "not_found"},   // unknown queue
      {Job("x", "urgent", 1, 1000, 1000), "priority_class", 404, "not_found"},  // unknown class
      {Job("x", "low", 1, 8000, 1000), "groups"},                               // never fits a node
      {R"({"name": ")" + big + R"(", "queue": "main"})", "body"},               // oversized body
      {R"({"name": "x", "user": "mallory", "queue": "main", "priority_class": "low", "groups": [{}]})",
       "user"},  // claims a submitter
  };
  for (const Case& c : cases) {
    Reply r = Call(port(), kAlice, "POST", "/v1/jobs", c.body);
    EXPECT_EQ(r.status, c.status) << c.body.substr(0, 200) << " -> " << r.body.dump();
    EXPECT_EQ(r.body["error"]["field"], c.field) << r.body.dump();
    EXPECT_EQ(r.body["error"]["code"], c.code) << r.body.dump();
    EXPECT_FALSE(r.body["error"].value("message", "").empty());
  }
  // Too many jobs from one user: valid, but in conflict with what the user runs now.
  Submit(kAlice, Job("two", "low", 1, 1000, 3600000));
  Submit(kAlice, Job("three", "low", 1, 1000, 3600000));
  Reply limit = Call(port(), kAlice, "POST", "/v1/jobs", Job("four", "low", 1, 1000, 3600000));
  EXPECT_EQ(limit.status, 409);
  EXPECT_EQ(limit.body["error"]["code"], "conflict") << limit.body.dump();
  EXPECT_EQ(limit.body["error"]["field"], "user") << limit.body.dump();
  // Other bad requests.
  EXPECT_EQ(Call(port(), kAlice, "GET", "/v1/jobs?state=sleeping").body["error"]["field"], "state");
  EXPECT_EQ(
      Call(port(), kAdmin, "PATCH", "/v1/jobs/1", R"({"queue": "other"})").body["error"]["field"],
      "queue");
  EXPECT_EQ(Call(port(), kAdmin, "PUT", "/v1/queues/main/quota", R"({"G": {"nominal_milli": -1}})")
                .status,
            400);
  EXPECT_EQ(Call(port(), kAdmin, "POST", "/v1/nodes/nope/drain").status, 404);
  // What was accepted is all there.
  Reply all = Call(port(), kAdmin, "GET", "/v1/jobs");
  std::set<std::string> names;
  for (const Json& j : all.body["jobs"]) names.insert(j["spec"]["name"].get<std::string>());
  EXPECT_EQ(names, (std::set<std::string>{"kept", "two", "three"}));
  EXPECT_EQ(GetJob(kept)["spec"]["name"], "kept");
  // The command checks a job as the server does before sending it, naming the flag.
  CommandResult bad = RunCli(server_->address(), kAdmin, "submit -q main -p low -g 1.5");
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.output.find("-g/--gpus: above 1 GPU must be a whole number"), std::string::npos)
      << bad.output;
  // It reports the server's error, naming the flag the user typed for the field.
  CommandResult refused = RunCli(server_->address(), kAdmin, "submit -q main -p urgent -g 1");
  EXPECT_EQ(refused.status, 1);
  EXPECT_NE(refused.output.find("-p/--priority-class: unknown priority class 'urgent'"),
            std::string::npos)
      << refused.output;
  EXPECT_NE(refused.output.find("HTTP 404"), std::string::npos) << refused.output;
}

// Each code of the server's errors has its HTTP status, and its name in the error body.
TEST_F(ServerTest, ErrorCodesMapToHttpStatuses) {
  Start();
  const std::uint64_t id = Submit(kAlice, Job("j", "low", 1, 1000, 3600000));
  struct Case {
    std::string token, method, path, body;
    int status;
    std::string code, field;
  };
  for (const Case& c : std::vector<Case>{
           {kAlice, "GET", "/v1/jobs?limit=0", "", 400, "invalid_argument", "limit"},
           {kBob, "POST", "/v1/jobs/" + std::to_string(id) + "/cancel", "", 403,
            "permission_denied", ""},
           {kAlice, "GET", "/v1/jobs/999", "", 404, "not_found", "job"},
           {kAdmin, "POST", "/v1/nodes/nope/cordon", "", 404, "not_found", "node"},
           {kAlice, "GET", "/v1/nothing", "", 404, "not_found", "path"},
           {kAlice, "POST", "/v1/jobs/" + std::to_string(id) + "/release", "", 403,
            "permission_denied", ""},
           {kAdmin, "POST", "/v1/jobs/" + std::to_string(id) + "/release", "", 409, "conflict", ""},
           {kAlice, "PATCH", "/v1/jobs/" + std::to_string(id), R"({"priority_class": "nope"})", 404,
            "not_found", "priority_class"},
           {kAlice, "PATCH", "/v1/jobs/" + std::to_string(id), R"({"queue": "other"})", 400,
            "invalid_argument", "queue"},
           {"", "GET", "/v1/jobs", "", 401, "unauthenticated", "Authorization"},
       }) {
    Reply r = Call(port(), c.token, c.method, c.path, c.body);
    EXPECT_EQ(r.status, c.status) << c.method << " " << c.path << " -> " << r.body.dump();
    EXPECT_EQ(r.body["error"]["code"], c.code) << r.body.dump();
    EXPECT_EQ(r.body["error"]["field"], c.field) << r.body.dump();
  }
}

// Regression: `arbiter submit -n 0` submitted one task; `arbiter cancel 1 abc 2` cancelled job 1
// and stopped. Both are usage errors found before anything is sent (no server is needed to see
// it: nothing listens at this address).
TEST(ServerCommandTest, BadTaskCountAndBadIdsAreRefusedBeforeSending) {
  CommandResult zero = RunCli("127.0.0.1:1", "t", "submit -q main -p low -n 0");
  EXPECT_EQ(zero.status, 2) << zero.output;
  EXPECT_NE(zero.output.find("-n/--tasks: must be at least 1, got 0"), std::string::npos)
      << zero.output;
  CommandResult cancel = RunCli("127.0.0.1:1", "t", "cancel 1 abc 2");
  EXPECT_EQ(cancel.status, 2) << cancel.output;
  EXPECT_NE(cancel.output.find("'abc'"), std::string::npos) << cancel.output;
  EXPECT_NE(cancel.output.find("no job was cancelled"), std::string::npos) << cancel.output;
  EXPECT_EQ(cancel.output.find("cannot reach"), std::string::npos) << cancel.output;
}

// `arbiter server --config examples/cluster.yaml --virtual-nodes` runs as shipped, with the
// tokens the file documents.
TEST(ServerExampleTest, TheShippedExampleRunsAsIs) {
  TempDir dir;
  ServerProcess server(std::string(ARBITER_SOURCE_DIR) + "/examples/cluster.yaml",
                       (dir.path() / "data").string());
  ASSERT_TRUE(server.ready());
  CommandResult submit = RunCli(server.address(), "example-alice-token",
                                "submit -q training -p P1 -n 2 -g 8 -t H800 --topology leaf -r 2h "
                                "--name finetune -- torchrun train.py");
  ASSERT_EQ(submit.status, 0) << submit.output;
  ASSERT_TRUE(WaitFor([&] {
    Reply r = Call(server.port(), "example-admin-token", "GET", "/v1/jobs/1");
    return r.body["status"].value("state", "") == "running";
  }));
  CommandResult jobs = RunCli(server.address(), "example-alice-token", "jobs");
  EXPECT_NE(jobs.output.find("h800-"), std::string::npos) << jobs.output;
  EXPECT_EQ(RunCli(server.address(), "example-agent-token", "submit -q batch -p P2 -g 1").status,
            1);
  // The shipped jobs file as it is: every job is sent (user: ignored with a note, affinity and
  // replicas taken); the server refuses only the two that the example shows can never fit.
  CommandResult file =
      RunCli(server.address(), "example-admin-token",
             "submit -f " + std::string(ARBITER_SOURCE_DIR) + "/examples/jobs.yaml");
  EXPECT_EQ(file.status, 1) << file.output;
  EXPECT_NE(file.output.find("user: ignored: the server records the submitter"), std::string::npos)
      << file.output;
  EXPECT_NE(file.output.find("(chat-serving-2)"), std::string::npos) << file.output;
  EXPECT_NE(file.output.find("(llama-70b-pretrain)"), std::string::npos) << file.output;
  EXPECT_EQ(file.output.find("unknown field"), std::string::npos) << file.output;
  std::size_t refused = 0;
  for (std::size_t at = file.output.find("HTTP 400"); at != std::string::npos;
       at = file.output.find("HTTP 400", at + 1)) {
    ++refused;
  }
  EXPECT_EQ(refused, 2u) << file.output;  // moe-giant and distill-32g
  // The address and token from the user's client file.
  const std::string client = (dir.path() / "client.yaml").string();
  std::ofstream(client) << "server: http://" << server.address()
                        << "\ntoken: example-admin-token\n";
  CommandResult queues = RunCli("", "", "queues --json", client);
  EXPECT_EQ(queues.status, 0) << queues.output;
  EXPECT_NE(queues.output.find("\"training\""), std::string::npos) << queues.output;
}

TEST(ServerCommandTest, ClearErrorWhenTheServerIsUnreachable) {
  CommandResult r = RunCli("127.0.0.1:1", "t", "jobs");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("cannot reach the Arbiter server at http://127.0.0.1:1"),
            std::string::npos)
      << r.output;
}

TEST_F(ServerTest, RestartRecoversJobsNodesAndQuotas) {
  Start();
  const std::uint64_t running = Submit(kAdmin, Job("long", "low", 1, 4000, 3600000));
  ASSERT_TRUE(WaitState(running, "running"));
  // Two 4-GPU tasks cannot start beside `long` (8 GPUs in all): it is still pending when held
  // (a 1-GPU job could start before the hold, and the hold would then be refused).
  const std::uint64_t held = Submit(kAdmin, Job("held", "low", 2, 4000, 1000));
  ASSERT_EQ(Call(port(), kAdmin, "POST", "/v1/jobs/" + std::to_string(held) + "/hold").status, 200);
  ASSERT_EQ(Call(port(), kAdmin, "POST", "/v1/nodes/g-1/cordon").status, 200);
  ASSERT_EQ(
      Call(port(), kAdmin, "PUT", "/v1/queues/other/quota", R"({"G": {"nominal_milli": 2000}})")
          .status,
      200);
  const Json before = GetJob(running);
  EXPECT_EQ(server_->Stop(SIGTERM), 0);
  server_.emplace(config_, (dir_.path() / "data").string());
  ASSERT_TRUE(server_->ready());
  EXPECT_EQ(GetJob(running)["status"], before["status"]);
  EXPECT_EQ(State(held), "held");
  Reply nodes = Call(port(), kAdmin, "GET", "/v1/nodes");
  EXPECT_EQ(nodes.body["nodes"][1]["state"], "cordoned");
  Reply queues = Call(port(), kAdmin, "GET", "/v1/queues");
  EXPECT_EQ(queues.body["queues"][1]["quota"]["G"]["nominal_milli"], 2000) << queues.body.dump();
  // A new job lands on g-0's free devices? No: g-0 is full, g-1 cordoned.
  const std::uint64_t next = Submit(kAdmin, Job("next", "low", 1, 1000, 1000));
  ASSERT_TRUE(WaitFor([&] {
    return GetJob(next).value("reason", "").find("1 node cordoned") != std::string::npos;
  })) << GetJob(next).dump();
  EXPECT_GT(next, held);  // ids are never reused
}

// A queue's recent usage (the input of its fair-share factor) is not forgotten when a quota
// changes (the cluster state is rebuilt) or the server restarts.
TEST_F(ServerTest, FairShareUsageOutlivesQuotaChangesAndRestarts) {
  Start();
  const std::uint64_t job = Submit(kAdmin, Job("long", "low", 1, 4000, 3600000));
  ASSERT_TRUE(WaitState(job, "running"));
  auto used = [&] {
    Reply queues = Call(port(), kAdmin, "GET", "/v1/queues");
    return queues.body["queues"][0].value("recent_gpu_seconds", 0.0);
  };
  ASSERT_TRUE(WaitFor([&] { return used() > 2.0; }));  // 4 GPUs for half a second
  const double before = used();
  ASSERT_EQ(
      Call(port(), kAdmin, "PUT", "/v1/queues/main/quota", R"({"G": {"nominal_milli": 8000}})")
          .status,
      200);
  const double after_quota = used();
  EXPECT_GE(after_quota, before);
  EXPECT_EQ(server_->Stop(SIGTERM), 0);  // a clean stop saves it
  server_.emplace(config_, (dir_.path() / "data").string());
  ASSERT_TRUE(server_->ready());
  // Decayed over the restart by at most its half-life's share (an hour by default): about kept.
  EXPECT_GE(used(), after_quota * 0.99);
}

// The configuration cordons both nodes; g-0 is uncordoned and g-1 drained through the API. After
// a restart the API's last word holds for each: g-0 schedulable (it used to be cordoned again,
// as the store kept only nodes that were not schedulable), g-1 draining.
TEST_F(ServerTest, RestartHonoursTheLastNodeStateOfTheApi) {
  std::string yaml = ClusterYaml(5);
  const std::string count = "    count: 2\n";
  yaml.replace(yaml.find(count), count.size(), count + "    cordoned: true\n");
  config_ = dir_.Write("cluster.yaml", yaml);
  server_.emplace(config_, (dir_.path() / "data").string());
  ASSERT_TRUE(server_->ready());
  auto states = [&] {
    std::map<std::string, std::string> out;
    const Reply nodes = Call(port(), kAdmin, "GET", "/v1/nodes");
    for (const Json& n : nodes.body["nodes"]) out[n["name"]] = n["state"];
    return out;
  };
  EXPECT_EQ(states(),
            (std::map<std::string, std::string>{{"g-0", "cordoned"}, {"g-1", "cordoned"}}));
  ASSERT_EQ(Call(port(), kAdmin, "POST", "/v1/nodes/g-0/uncordon").status, 200);
  ASSERT_EQ(RunCli(server_->address(), kAdmin, "drain g-1 --reason maintenance").status, 0);
  const std::map<std::string, std::string> set = {{"g-0", "schedulable"}, {"g-1", "draining"}};
  EXPECT_EQ(states(), set);
  EXPECT_EQ(server_->Stop(SIGTERM), 0);
  server_.emplace(config_, (dir_.path() / "data").string());
  ASSERT_TRUE(server_->ready());
  EXPECT_EQ(states(), set);
  // And the scheduler agrees: a job runs, on g-0.
  const std::uint64_t job = Submit(kAdmin, Job("after", "low", 1, 1000, 3600000));
  ASSERT_TRUE(WaitState(job, "running")) << GetJob(job).dump();
  EXPECT_EQ(GetJob(job)["status"]["allocation"]["tasks"][0]["node"], "g-0");
}

TEST_F(ServerTest, DrainMovesJobsOffTheNode) {
  Start();
  const std::uint64_t job = Submit(kAdmin, Job("long", "low", 1, 4000, 3600000));
  ASSERT_TRUE(WaitState(job, "running"));
  const std::string node = GetJob(job)["status"]["allocation"]["tasks"][0]["node"];
  const std::string other = node == "g-0" ? "g-1" : "g-0";
  CommandResult drain =
      RunCli(server_->address(), kAdmin, "drain " + node + " --reason maintenance");
  ASSERT_EQ(drain.status, 0) << drain.output;
  // Requeued (not an eviction) and placed again on the other node.
  ASSERT_TRUE(WaitFor([&] {
    const Json j = GetJob(job);
    return j["status"].value("state", "") == "running" &&
           j["status"]["allocation"]["tasks"][0]["node"] == other;
  })) << GetJob(job).dump();
  EXPECT_FALSE(GetJob(job)["status"].contains("evictions_ms"));
  Reply events = Call(port(), kAdmin, "GET", "/v1/events?cursor=0");
  std::vector<std::string> kinds;
  for (const Json& e : events.body["events"]) kinds.push_back(e["kind"]);
  EXPECT_EQ(kinds, (std::vector<std::string>{"submitted", "started", "node_draining", "requeued",
                                             "started"}));
  Reply nodes = Call(port(), kAdmin, "GET", "/v1/nodes");
  for (const Json& n : nodes.body["nodes"]) {
    if (n["name"] == node) {
      EXPECT_EQ(n["state"], "draining");
      EXPECT_EQ(n["reason"], "maintenance");
    }
  }
  EXPECT_EQ(RunCli(server_->address(), kAdmin, "uncordon " + node).status, 0);
  nodes = Call(port(), kAdmin, "GET", "/v1/nodes");
  for (const Json& n : nodes.body["nodes"]) EXPECT_EQ(n["state"], "schedulable") << n.dump();
}

TEST_F(ServerTest, QuotaChangedAtRunTimeTakesEffect) {
  Start();
  ASSERT_EQ(Call(port(), kAdmin, "PUT", "/v1/queues/main/quota",
                 R"({"G": {"nominal_milli": 4000, "max_milli": 4000}})")
                .status,
            200);
  const std::uint64_t first = Submit(kAdmin, Job("first", "low", 1, 4000, 3600000));
  const std::uint64_t second = Submit(kAdmin, Job("second", "low", 1, 4000, 3600000));
  ASSERT_TRUE(WaitState(first, "running"));
  ASSERT_TRUE(WaitFor([&] { return GetJob(second).value("reason", "").find("quota") == 0; }))
      << GetJob(second).dump();
  // Too big for the new maximum: refused at once.
  Reply big = Call(port(), kAdmin, "POST", "/v1/jobs", Job("big", "low", 2, 4000, 1000));
  EXPECT_EQ(big.status, 400);
  EXPECT_EQ(big.body["error"]["field"], "queue") << big.body.dump();
  ASSERT_EQ(Call(port(), kAdmin, "DELETE", "/v1/queues/main/quota").status, 200);
  EXPECT_TRUE(WaitState(second, "running"));
}

// A stored job that no longer resolves against an edited configuration stops the start, named,
// rather than being dropped.
TEST_F(ServerTest, RefusesToStartWhenAStoredJobNoLongerResolves) {
  Start();
  Submit(kAdmin, Job("elsewhere", "low", 1, 1000, 3600000, "other"));
  EXPECT_EQ(server_->Stop(SIGTERM), 0);
  std::string edited = ClusterYaml(5);
  edited.replace(edited.find("  - {name: other}\n"), std::string("  - {name: other}\n").size(), "");
  const std::string config = dir_.Write("edited.yaml", edited);
  CommandResult start = RunCli("", "",
                               "server --dev --config " + config + " --listen 127.0.0.1:0 --data " +
                                   (dir_.path() / "data").string(),
                               "/nonexistent");
  EXPECT_EQ(start.status, 1) << start.output;
  EXPECT_NE(start.output.find("store: job 1 (elsewhere) no longer fits the configuration: queue: "
                              "unknown leaf queue 'other'"),
            std::string::npos)
      << start.output;
}

// kill -9 while four clients submit over keep-alive connections; after a restart every
// acknowledged job is there exactly once, and no device is allocated twice.
TEST_F(ServerTest, KillNineWhileSubmittingLosesNothingAcknowledged) {
  Start(/*max_jobs_per_user=*/1000000);
  std::mutex mu;
  std::map<std::uint64_t, std::string> acknowledged;  // id -> name
  std::atomic<bool> stop{false};
  std::vector<std::thread> clients;
  for (int c = 0; c < 4; ++c) {
    clients.emplace_back([&, c] {
      httplib::Client client("127.0.0.1", port());
      client.set_keep_alive(true);
      httplib::Headers headers{{"Authorization", std::string("Bearer ") + kAdmin}};
      for (int i = 0; !stop; ++i) {
        const std::string name = "c" + std::to_string(c) + "-" + std::to_string(i);
        // Mixed priorities and long runtimes: jobs run, wait and preempt while the kill comes.
        const std::string body =
            Job(name, i % 5 == 0 ? "high" : "low", 1, 1000 * (1 + i % 2), 3600000);
        auto res = client.Post("/v1/jobs", headers, body, "application/json");
        if (!res) break;  // the server is gone
        if (res->status != 201) continue;
        Json answer = Json::parse(res->body);
        std::lock_guard lock(mu);
        acknowledged[answer["id"].get<std::uint64_t>()] = name;
      }
    });
  }
  ASSERT_TRUE(WaitFor([&] {
    std::lock_guard lock(mu);
    return acknowledged.size() >= 300;
  }));
  server_->Stop(SIGKILL);
  stop = true;
  for (std::thread& t : clients) t.join();

  server_.emplace(config_, (dir_.path() / "data").string());
  ASSERT_TRUE(server_->ready());
  Reply all = Call(port(), kAdmin, "GET", "/v1/jobs?limit=1000000");
  ASSERT_EQ(all.status, 200);
  std::map<std::string, int> seen;  // name -> times
  std::map<std::uint64_t, std::string> by_id;
  std::map<std::pair<std::string, std::int64_t>, std::int64_t> devices;  // (node, device) -> milli
  for (const Json& j : all.body["jobs"]) {
    ++seen[j["spec"]["name"].get<std::string>()];
    by_id[j["id"].get<std::uint64_t>()] = j["spec"]["name"];
    const Json& status = j["status"];
    // A victim told to stop (stop_at) has given its devices to its preemptor already.
    if (status["state"] != "running" || status.contains("stop_at_ms")) continue;
    for (const Json& t : status["allocation"]["tasks"]) {
      for (const Json& d : t["devices"]) {
        devices[{t["node"], d["device"]}] += d.value("gpu_milli", 1000);
      }
    }
  }
  for (const auto& [id, name] : acknowledged) {
    ASSERT_TRUE(by_id.count(id)) << "acknowledged job " << id << " (" << name << ") is lost";
    EXPECT_EQ(by_id[id], name);
    EXPECT_EQ(seen[name], 1) << name << " is there " << seen[name] << " times";
  }
  for (const auto& [name, times] : seen) EXPECT_EQ(times, 1) << name;
  for (const auto& [device, milli] : devices) {
    EXPECT_LE(milli, 1000) << device.first << "[" << device.second << "] allocated " << milli;
  }
  // And the server goes on scheduling from there.
  const std::uint64_t after = Submit(kAdmin, Job("after", "high", 1, 1000, 1000));
  EXPECT_GT(after, acknowledged.rbegin()->first);
}

}  // namespace
}  // namespace arbiter::testing
