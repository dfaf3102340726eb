// The dashboard's side of the server, end to end: its static files at /ui/ (no token, the
// headers that keep the browser to them), the read-only viewer role, the compact cluster map,
// a job's own events and the queues' usage history. The dashboard itself is tested in a browser
// (tests/ui/dashboard.test.js).
#include <gtest/gtest.h>

#include <set>

#include "server/server_process.h"

namespace arbiter::testing {
namespace {

constexpr const char* kAdmin = "admin-token-0001";
constexpr const char* kAlice = "alice-token-0001";
constexpr const char* kWall = "wall-token-00001";

// Two leaves of two nodes each (4 GPUs in two NVLink groups of 2), and one of 2 devices.
std::string ClusterYaml() {
  return R"(
topology:
  levels: [spine, leaf]
priority_classes:
  - {name: high, value: 100}
  - {name: low, value: 10}
queues:
  - {name: main, quota: {G: {nominal: 4, max: 8}}}
  - {name: other}
nodes:
  - name: g-{i}
    count: 4
    gpus: {model: G, count: 4, memory: 40Gi, nvlink_group_size: 2}
    cpu: 32
    memory: 256Gi
    topology: {spine: s0, leaf: "l{i/2}"}
  - name: small
    gpus: {model: G, count: 2, memory: 40Gi}
    cpu: 8
    memory: 64Gi
    topology: {spine: s1, leaf: l9}
server:
  tokens:
    - {name: admin, token: admin-token-0001, role: admin}
    - {name: alice, token: alice-token-0001, role: user, queues: [main], priority_classes: [low]}
    - {name: wall, token: wall-token-00001, role: viewer}
  cycle_min_interval: 20ms
  cycle_period: 500ms
)";
}

std::string Job(const std::string& name, int tasks, int gpu_milli) {
  return Json{{"name", name},
              {"queue", "main"},
              {"priority_class", "low"},
              {"runtime_estimate_ms", 600000},
              {"groups", Json::array({{{"tasks", tasks}, {"gpu_milli", gpu_milli}}})}}
      .dump();
}

class DashboardServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_.emplace(dir_.Write("cluster.yaml", ClusterYaml()), (dir_.path() / "data").string());
    ASSERT_TRUE(server_->ready()) << "the server did not start";
  }
  int port() const { return server_->port(); }
  std::uint64_t SubmitRunning(const std::string& body) {
    Reply r = Call(port(), kAlice, "POST", "/v1/jobs", body);
    EXPECT_EQ(r.status, 201) << r.body.dump();
    const std::uint64_t id = r.body.value("id", std::uint64_t{0});
    EXPECT_TRUE(WaitFor([&] {
      return Call(port(), kAdmin, "GET", "/v1/jobs/" + std::to_string(id))
                 .body["status"]
                 .value("state", "") == "running";
    }));
    return id;
  }

  TempDir dir_;
  std::optional<ServerProcess> server_;
};

TEST_F(DashboardServerTest, ServesTheStaticFilesWithoutATokenAndWithTheirHeaders) {
  httplib::Client client("127.0.0.1", port());
  auto index = client.Get("/ui/");
  ASSERT_TRUE(index);
  EXPECT_EQ(index->status, 200);
  EXPECT_EQ(index->get_header_value("Content-Type"), "text/html; charset=utf-8");
  EXPECT_NE(index->body.find("<canvas id=\"cluster-canvas\""), std::string::npos);
  const std::string csp = index->get_header_value("Content-Security-Policy");
  EXPECT_NE(csp.find("script-src 'self'"), std::string::npos) << csp;
  EXPECT_NE(csp.find("default-src 'none'"), std::string::npos) << csp;
  EXPECT_EQ(index->get_header_value("X-Content-Type-Options"), "nosniff");

  auto script = client.Get("/ui/app.js");
  ASSERT_TRUE(script);
  EXPECT_EQ(script->status, 200);
  EXPECT_EQ(script->get_header_value("Content-Type"), "text/javascript; charset=utf-8");
  auto style = client.Get("/ui/app.css");
  ASSERT_TRUE(style);
  EXPECT_EQ(style->get_header_value("Content-Type"), "text/css; charset=utf-8");

  auto missing = client.Get("/ui/nothing.js");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  EXPECT_NE(missing->body.find("no file 'nothing.js'"), std::string::npos) << missing->body;

  client.set_follow_location(false);
  auto bare = client.Get("/ui");
  ASSERT_TRUE(bare);
  EXPECT_EQ(bare->status, 308);
  EXPECT_EQ(bare->get_header_value("Location"), "/ui/");

  // The API still wants a token.
  EXPECT_EQ(Call(port(), "", "GET", "/v1/cluster/map").status, 401);
}

TEST_F(DashboardServerTest, TheViewerReadsEverythingAndChangesNothing) {
  const std::uint64_t id = SubmitRunning(Job("train", 1, 1000));
  const std::string job = "/v1/jobs/" + std::to_string(id);

  Reply me = Call(port(), kWall, "GET", "/v1/whoami");
  EXPECT_EQ(me.status, 200);
  EXPECT_EQ(me.body["name"], "wall");
  EXPECT_EQ(me.body["role"], "viewer");
  for (const char* path : {"/v1/jobs", "/v1/queues", "/v1/nodes", "/v1/cluster/map",
                           "/v1/queues/usage", "/v1/events", "/v1/events?job=1"}) {
    EXPECT_EQ(Call(port(), kWall, "GET", path).status, 200) << path;
  }
  EXPECT_EQ(Call(port(), kWall, "GET", job).status, 200);

  struct Change {
    const char* method;
    std::string path;
    std::string body;
  };
  const std::vector<Change> changes = {
      {"POST", "/v1/jobs", Job("sneaky", 1, 1000)},
      {"DELETE", job, ""},
      {"POST", job + "/cancel", ""},
      {"POST", job + "/hold", ""},
      {"POST", job + "/release", ""},
      {"PATCH", job, R"({"priority_class": "high"})"},
      {"PUT", "/v1/queues/main/quota", R"({"G": {"nominal_milli": 1000}})"},
      {"DELETE", "/v1/queues/main/quota", ""},
      {"POST", "/v1/nodes/g-0/cordon", ""},
      {"POST", "/v1/nodes/g-0/drain", ""},
      {"POST", "/v1/nodes/g-0/uncordon", ""},
      {"POST", "/v1/nodes/g-0/register", "{}"},
      {"POST", "/v1/nodes/g-0/sync", "{}"},
  };
  for (const Change& c : changes) {
    Reply r = Call(port(), kWall, c.method, c.path, c.body);
    EXPECT_EQ(r.status, 403) << c.method << " " << c.path << ": " << r.body.dump();
    const std::string message = r.body["error"].value("message", "");
    EXPECT_NE(message.find("role viewer"), std::string::npos) << message;
  }
  // An admin's export is refused too (by the core: admin only).
  EXPECT_EQ(Call(port(), kWall, "GET", "/v1/admin/snapshot").status, 403);

  // Nothing changed: the job still runs, in its class; the node is schedulable; one job.
  Reply after = Call(port(), kAdmin, "GET", job);
  EXPECT_EQ(after.body["status"]["state"], "running");
  EXPECT_EQ(after.body["status"].value("priority_class", after.body["spec"]["priority_class"]),
            "low");
  EXPECT_EQ(Call(port(), kAdmin, "GET", "/v1/jobs").body["jobs"].size(), 1u);
  const Reply nodes = Call(port(), kAdmin, "GET", "/v1/nodes");  // alive through the loop
  for (const Json& n : nodes.body["nodes"]) EXPECT_EQ(n["state"], "schedulable") << n["name"];
}

TEST_F(DashboardServerTest, TheClusterMapHasEveryNodeItsTopologyAndTheJobsDevices) {
  const std::uint64_t whole = SubmitRunning(Job("whole", 1, 2000));
  const std::uint64_t half = SubmitRunning(Job("half", 1, 500));
  ASSERT_EQ(Call(port(), kAdmin, "POST", "/v1/nodes/small/cordon").status, 200);

  Reply r = Call(port(), kWall, "GET", "/v1/cluster/map");
  ASSERT_EQ(r.status, 200) << r.body.dump();
  const Json& map = r.body;
  EXPECT_EQ(map["levels"], Json::array({"spine", "leaf", "node", "nvlink"}));
  EXPECT_EQ(map["gpu_types"], Json::array({"G"}));
  EXPECT_EQ(map["queues"], Json::array({"main", "other"}));
  EXPECT_EQ(map["priority_classes"], Json::array({"high", "low"}));
  ASSERT_EQ(map["nodes"].size(), 5u);
  // Shapes shared: the four g- nodes have one, the small node another.
  ASSERT_EQ(map["shapes"].size(), 2u);
  EXPECT_EQ(map["shapes"][0], Json::array({0, 0, 0, 0, 0, 1, 0, 1}));
  EXPECT_EQ(map["shapes"][1], Json::array({0, 0, 0, 0}));
  std::set<std::string> paths;
  for (const Json& node : map["nodes"]) {
    std::string path = node[0].get<std::string>();
    for (std::int64_t d = node[1].get<std::int64_t>(); d >= 0;
         d = map["domains"][d][2].get<std::int64_t>())
      path = map["domains"][d][0].get<std::string>() + "/" + path;
    paths.insert(path);
  }
  EXPECT_EQ(paths, (std::set<std::string>{"s0/l0/g-0", "s0/l0/g-1", "s0/l1/g-2", "s0/l1/g-3",
                                          "s1/l9/small"}));
  EXPECT_EQ(map["nodes"][4][3], 1) << "small is cordoned";
  EXPECT_EQ(map["nodes"][0][3], 0);

  ASSERT_EQ(map["jobs"].size(), 2u);
  std::int64_t whole_devices = 0, half_milli = 0;
  for (const Json& j : map["jobs"]) {
    EXPECT_EQ(j[1], 0) << "queue main";
    EXPECT_EQ(j[2], 1) << "class low";
    EXPECT_EQ(j[3], "alice");
    EXPECT_GT(j[4].get<std::int64_t>(), 0) << "start";
    EXPECT_EQ(j[6], -1) << "not stopping";
    for (const Json& run : j[7]) {
      if (j[0] == whole) {
        whole_devices += run[2].get<std::int64_t>();
        EXPECT_EQ(run[3], 1000);
      }
      if (j[0] == half) half_milli += run[2].get<std::int64_t>() * run[3].get<std::int64_t>();
    }
  }
  EXPECT_EQ(whole_devices, 2);
  EXPECT_EQ(half_milli, 500);
  EXPECT_GT(map["cursor"].get<std::uint64_t>(), 0u);
}

TEST_F(DashboardServerTest, EventsOfOneJobAndTheQueuesUsageHistory) {
  const std::uint64_t first = SubmitRunning(Job("first", 1, 1000));
  const std::uint64_t second = SubmitRunning(Job("second", 1, 1000));
  ASSERT_EQ(Call(port(), kAlice, "POST", "/v1/jobs/" + std::to_string(first) + "/cancel").status,
            200);

  Reply r = Call(port(), kWall, "GET", "/v1/events?job=" + std::to_string(first));
  ASSERT_EQ(r.status, 200) << r.body.dump();
  std::vector<std::string> kinds;
  for (const Json& e : r.body["events"]) {
    EXPECT_EQ(e["job"], first);
    kinds.push_back(e["kind"]);
  }
  EXPECT_EQ(kinds, (std::vector<std::string>{"submitted", "started", "cancelled"}));
  // The cursor is where the scan stopped: the log's end, past the other job's events.
  Reply all = Call(port(), kWall, "GET", "/v1/events");
  EXPECT_EQ(r.body["cursor"], all.body["cursor"]);
  Reply more = Call(port(), kWall, "GET",
                    "/v1/events?job=" + std::to_string(first) +
                        "&cursor=" + std::to_string(r.body["cursor"].get<std::uint64_t>()));
  EXPECT_TRUE(more.body["events"].empty());
  Reply limited = Call(port(), kWall, "GET", "/v1/events?limit=1&job=" + std::to_string(second));
  ASSERT_EQ(limited.body["events"].size(), 1u);
  EXPECT_EQ(limited.body["events"][0]["kind"], "submitted");
  EXPECT_EQ(limited.body["cursor"], limited.body["events"][0]["seq"]);

  Reply bad = Call(port(), kWall, "GET", "/v1/events?job=x");
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.body["error"]["field"], "job");
  EXPECT_EQ(Call(port(), kWall, "GET", "/v1/events?job=1&wait=5").body["error"]["field"], "wait");

  Reply usage = Call(port(), kWall, "GET", "/v1/queues/usage");
  ASSERT_EQ(usage.status, 200) << usage.body.dump();
  EXPECT_EQ(usage.body["period_ms"], 60000);
  ASSERT_GE(usage.body["times_ms"].size(), 1u);
  const std::size_t samples = usage.body["times_ms"].size();
  ASSERT_EQ(usage.body["queues"].size(), 2u);
  const Json& main = usage.body["queues"][0];
  EXPECT_EQ(main["name"], "main");
  // main has a quota on G and uses it: its all-GPUs and G series, one value per sample; the
  // last (now) is the second job's GPU.
  ASSERT_TRUE(main["usage_milli"].contains("G")) << main.dump();
  ASSERT_TRUE(main["usage_milli"].contains("gpu")) << main.dump();
  EXPECT_EQ(main["usage_milli"]["G"].size(), samples);
  EXPECT_EQ(main["usage_milli"]["gpu"].back(), 1000);
  EXPECT_TRUE(usage.body["queues"][1]["usage_milli"].empty()) << "other: no quota, no use";
}

}  // namespace
}  // namespace arbiter::testing
