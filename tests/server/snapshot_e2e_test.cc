// End to end: `arbiter snapshot` against a real server (admin only), read back by the snapshot
// reader into the state the server had, then asked offline with `explain --snapshot` and
// `plan --snapshot`.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <string>

#include "config/snapshot.h"
#include "server/server_process.h"

namespace arbiter::testing {
namespace {

constexpr const char* kAdmin = "admin-token-0001";
constexpr const char* kAlice = "alice-token-0001";

constexpr const char* kCluster = R"(
priority_classes:
  - {name: high, value: 100, preemptible: false}
  - {name: low, value: 10, grace_period: 1s}
queues:
  - {name: main}
nodes:
  - name: g-{i}
    count: 2
    gpus: {model: G, count: 4, memory: 40Gi}
    cpu: 32
    memory: 256Gi
server:
  tokens:
    - {name: admin, token: admin-token-0001, role: admin}
    - {name: alice, token: alice-token-0001, role: user, queues: [main]}
  cycle_min_interval: 20ms
  cycle_period: 500ms
)";

std::string Job(const std::string& name, int tasks, int gpu_milli) {
  return Json{{"name", name},
              {"queue", "main"},
              {"priority_class", "low"},
              {"runtime_estimate_ms", 3600000},
              {"argv", Json::array({"train", "--lr", "0.1"})},
              {"groups", Json::array({{{"tasks", tasks}, {"gpu_milli", gpu_milli}}})}}
      .dump();
}

::testing::AssertionResult HasSubstr(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << text << "' does not contain '" << part << "'";
}

TEST(SnapshotE2e, AnAdminWritesTheServersStateAndItIsAskedOffline) {
  TempDir dir;
  ServerProcess server(dir.Write("cluster.yaml", kCluster), (dir.path() / "data").string());
  ASSERT_TRUE(server.ready()) << "the server did not start";
  const int port = server.port();
  auto submit = [&](const std::string& body) {
    Reply r = Call(port, kAlice, "POST", "/v1/jobs", body);
    EXPECT_EQ(r.status, 201) << r.body.dump();
    return r.status == 201 ? r.body["id"].get<std::uint64_t>() : 0;
  };
  auto state = [&](std::uint64_t id) {
    return Call(port, kAdmin, "GET", "/v1/jobs/" + std::to_string(id))
        .body["status"]
        .value("state", "?");
  };
  const std::uint64_t running = submit(Job("trainer", 1, 2000));
  ASSERT_TRUE(WaitFor([&] { return state(running) == "running"; }));
  ASSERT_EQ(RunCli(server.address(), kAdmin, "cordon g-1 --reason repair").status, 0);
  const std::uint64_t waiting = submit(Job("too-big", 2, 4000));  // g-1 is cordoned
  const std::uint64_t held = submit(Job("later", 1, 4000));  // does not fit either: stays pending
  ASSERT_EQ(Call(port, kAlice, "POST", "/v1/jobs/" + std::to_string(held) + "/hold").status, 200);
  ASSERT_TRUE(WaitFor([&] {
    return !Call(port, kAdmin, "GET", "/v1/jobs/" + std::to_string(waiting))
                .body.value("reason", "")
                .empty();
  }));
  const Json trainer = Call(port, kAdmin, "GET", "/v1/jobs/" + std::to_string(running)).body;

  // Admin only.
  CommandResult denied = RunCli(server.address(), kAlice, "snapshot");
  EXPECT_EQ(denied.status, 1);
  EXPECT_TRUE(HasSubstr(denied.output, "HTTP 403")) << denied.output;
  {
    httplib::Client client("127.0.0.1", port);
    auto res =
        client.Get("/v1/admin/snapshot", {{"Authorization", std::string("Bearer ") + kAdmin}});
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200);
    EXPECT_TRUE(HasSubstr(res->get_header_value("Content-Type"), "application/yaml"));
    EXPECT_TRUE(HasSubstr(res->body, "snapshot_version: 1"));
  }

  const std::string file = (dir.path() / "now.yaml").string();
  CommandResult taken = RunCli(server.address(), kAdmin, "snapshot -o " + file);
  ASSERT_EQ(taken.status, 0) << taken.output;
  Result<config::LoadedSnapshot> loaded = config::LoadSnapshotFile(file);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  const config::Snapshot& snap = loaded->snapshot;
  EXPECT_TRUE(snap.calendar);
  EXPECT_GT(snap.taken_at, trainer["spec"]["submit_time_ms"].get<Millis>());
  // The running job where the server runs it, with its spec as submitted.
  ASSERT_EQ(snap.running.size(), 1u);
  EXPECT_EQ(snap.running[0].id, running);
  EXPECT_EQ(snap.running[0].spec.name, "trainer");
  EXPECT_EQ(snap.running[0].spec.user, "alice");
  EXPECT_EQ(snap.running[0].spec.argv, (std::vector<std::string>{"train", "--lr", "0.1"}));
  EXPECT_EQ(snap.running[0].start_time, trainer["status"]["start_time_ms"].get<Millis>());
  const RunningJob* bound = loaded->state.FindRunning(running);
  ASSERT_NE(bound, nullptr);
  EXPECT_EQ(loaded->state.Describe(bound->allocation.tasks[0]),
            trainer["tasks"][0].get<std::string>());
  // The pending job, the held one, the cordoned node with its reason, the queue's usage.
  ASSERT_EQ(snap.pending.size(), 2u);
  EXPECT_EQ(snap.pending[0].spec.name, "too-big");
  EXPECT_FALSE(snap.pending[0].held);
  EXPECT_EQ(snap.pending[1].spec.name, "later");
  EXPECT_TRUE(snap.pending[1].held);
  ASSERT_EQ(loaded->pending.size(), 1u);
  ASSERT_EQ(snap.node_states.size(), 1u);
  EXPECT_EQ(snap.node_states[0].node, "g-1");
  EXPECT_EQ(snap.node_states[0].state, config::SnapshotNode::State::kCordoned);
  EXPECT_EQ(snap.node_states[0].reason, "repair");
  EXPECT_TRUE(loaded->state.node(*loaded->state.FindNode("g-1")).cordoned);
  EXPECT_EQ(snap.queue_usage.count("main"), 1u);
  // No tokens leave the server.
  std::ifstream in(file);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_FALSE(HasSubstr(text, "token"));

  // Asked offline: the server is not needed.
  server.Stop(SIGTERM);
  CommandResult why = RunCli("127.0.0.1:1", "t", "explain --snapshot " + file + " too-big");
  ASSERT_EQ(why.status, 0) << why.output;
  EXPECT_TRUE(HasSubstr(why.output, "pending: ")) << why.output;
  CommandResult where = RunCli("127.0.0.1:1", "t", "explain --snapshot " + file + " trainer");
  ASSERT_EQ(where.status, 0) << where.output;
  EXPECT_TRUE(HasSubstr(where.output, "running since ")) << where.output;
  EXPECT_TRUE(HasSubstr(where.output, trainer["tasks"][0].get<std::string>())) << where.output;
  CommandResult plan = RunCli("127.0.0.1:1", "t", "plan --snapshot " + file);
  ASSERT_EQ(plan.status, 0) << plan.output;
  EXPECT_TRUE(HasSubstr(plan.output, "too-big")) << plan.output;
}

// Under a Gittins order the server learns each completed job's size (its GPU-time): the snapshot
// carries what it learned, so that an offline plan orders as the server did.
TEST(SnapshotE2e, AGittinsServerLearnsTheSizesOfCompletedJobs) {
  TempDir dir;
  std::string cluster = kCluster;
  cluster.replace(cluster.find("priority_classes:"), 0,
                  "scheduler:\n  ordering: {policy: gittins, gittins_window: 2}\n");
  ServerProcess server(dir.Write("cluster.yaml", cluster), (dir.path() / "data").string());
  ASSERT_TRUE(server.ready()) << "the server did not start";
  const int port = server.port();
  std::vector<std::uint64_t> ids;
  for (int gpus : {1, 2, 4}) {
    const std::string body =
        Json{{"name", "short-" + std::to_string(gpus)},
             {"queue", "main"},
             {"priority_class", "low"},
             {"runtime_estimate_ms", 300},
             {"groups", Json::array({{{"tasks", 1}, {"gpu_milli", gpus * 1000}}})}}
            .dump();
    Reply r = Call(port, kAlice, "POST", "/v1/jobs", body);
    ASSERT_EQ(r.status, 201) << r.body.dump();
    ids.push_back(r.body["id"].get<std::uint64_t>());
  }
  for (std::uint64_t id : ids) {
    ASSERT_TRUE(WaitFor([&] {
      return Call(port, kAdmin, "GET", "/v1/jobs/" + std::to_string(id))
                 .body["status"]
                 .value("state", "?") == "completed";
    }));
  }
  const std::string file = (dir.path() / "learned.yaml").string();
  CommandResult taken = RunCli(server.address(), kAdmin, "snapshot -o " + file);
  ASSERT_EQ(taken.status, 0) << taken.output;
  Result<config::LoadedSnapshot> loaded = config::LoadSnapshotFile(file);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  // The last two (the window), each about its run time times its GPUs.
  const std::vector<Millis>& sizes = loaded->snapshot.finished_service;
  ASSERT_EQ(sizes.size(), 2u);
  for (Millis size : sizes) EXPECT_GT(size, 0);
  EXPECT_EQ(loaded->state.finished_service(), sizes);
  EXPECT_EQ(loaded->snapshot.config.engine.ordering.policy, OrderPolicy::kGittins);
}

}  // namespace
}  // namespace arbiter::testing
