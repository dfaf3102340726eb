// The hostile-input suite (issue 18, item 8; docs/security.md): requests an attacker would send,
// over HTTP, to a real server whose nodes are real agents (no --virtual-nodes). Each case of a
// table says its request, the status and the error's `field` it must get, and that nothing
// changed: the jobs, queues, nodes and the event log are listed before and after it (fields that
// change with time alone left out) and must be the same. The server must answer /healthz after
// every case.
//
// One server and its agents serve every table of a process (ctest runs each test in a process of
// its own, which then starts its own): nodes n-0 and n-1 have agents and run a job each (alice's
// and bob's), n-2 has none (it stays "waiting": no malformed registration may make it ready);
// alice also has a held and a pending job, and as many active jobs as she may have.
//
// The defects this suite found (node state reasons with control characters, quotas that
// overflowed the queue tree's sums, a node's long syncs holding every connection thread) are
// fixed; their cases stay as tests of their own (HostileFoundDefects).
#include <arpa/inet.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "agent/agent_process.h"
#include "crypto/crypto.h"
#include "net/http_server.h"
#include "server/server_process.h"

namespace arbiter::testing {
namespace {

constexpr const char* kAdmin = "hostile-admin-token-01";
constexpr const char* kAlice = "hostile-alice-token-01";
constexpr const char* kBob = "hostile-bob-token-00001";
constexpr const char* kCarol = "hostile-carol-token-01";
constexpr const char* kLate = "hostile-late-token-001";      // a user's, expired
constexpr const char* kJoin = "hostile-join-token-001";      // joins any n-*
constexpr const char* kJoinN0 = "hostile-join-n0-token1";    // joins n-0 only
constexpr const char* kJoinLate = "hostile-join-late-tok1";  // an agent's, expired
constexpr std::int64_t kMaxBody = 512 * 1024;                // server.max_body_bytes

// Three nodes of two GPUs under one tree of queues; alice and bob may use main with P1 and P2,
// carol other with P2; one user token and one join token have expired.
std::string ClusterYaml() {
  return fmt::format(R"(
priority_classes:
  - {{name: P0, value: 100, preemptible: false}}
  - {{name: P1, value: 10, grace_period: 5s}}
  - {{name: P2, value: 1, grace_period: 5s}}
queues:
  - {{name: org}}
  - {{name: main, parent: org}}
  - {{name: other, parent: org}}
nodes:
  - name: n-{{i}}
    count: 3
    gpus: {{model: G, count: 2, memory: 40Gi}}
    cpu: 1
    memory: 256Mi
server:
  tokens:
    - {{name: admin, token: {}, role: admin}}
    - {{name: alice, token: {}, role: user, queues: [main], priority_classes: [P1, P2]}}
    - {{name: bob, token: {}, role: user, queues: [main], priority_classes: [P1, P2]}}
    - {{name: carol, token: {}, role: user, queues: [other], priority_classes: [P2]}}
    - {{name: late, token: {}, role: user, queues: [main], priority_classes: [P1],
       expires: 2020-01-01T00:00:00Z}}
    - {{name: join, token: {}, role: agent, nodes: ["n-*"]}}
    - {{name: join-n0, token: {}, role: agent, nodes: [n-0]}}
    - {{name: join-late, token: {}, role: agent, expires: 2020-01-01T00:00:00Z}}
  cycle_min_interval: 20ms
  cycle_period: 200ms
  node_lost_timeout: 30s
  agent_sync_wait: 200ms
  kill_after: 2s
  max_body_bytes: {}
  max_active_jobs_per_user: 3
  max_watchers: 16
  max_watchers_per_token: 4
)",
                     kAdmin, kAlice, kBob, kCarol, kLate, kJoin, kJoinN0, kJoinLate, kMaxBody);
}

// ---- HTTP ----

struct Request {
  std::string method = "GET";
  std::string path;
  std::string body;
  // The Authorization header's whole value; none when absent.
  std::optional<std::string> authorization;
};

struct Answer {
  int status = 0;  // 0: no answer
  std::string text;
  Json json;
  double seconds = 0;
};

Answer Send(int port, const Request& r, std::chrono::seconds timeout = std::chrono::seconds(60)) {
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(timeout);
  client.set_write_timeout(timeout);
  httplib::Headers headers;
  if (r.authorization) headers.emplace("Authorization", *r.authorization);
  const auto t0 = std::chrono::steady_clock::now();
  const std::string& m = r.method;
  httplib::Result res = m == "GET"      ? client.Get(r.path, headers)
                        : m == "DELETE" ? client.Delete(r.path, headers)
                        : m == "PUT"    ? client.Put(r.path, headers, r.body, "application/json")
                        : m == "PATCH"  ? client.Patch(r.path, headers, r.body, "application/json")
                                        : client.Post(r.path, headers, r.body, "application/json");
  Answer a;
  a.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!res) return a;
  a.status = res->status;
  a.text = res->body;
  a.json = Json::parse(res->body, nullptr, false);
  return a;
}

std::string Bearer(const std::string& token) { return "Bearer " + token; }

Request Req(const std::string& token, const std::string& method, const std::string& path,
            const std::string& body = "") {
  Request r;
  r.method = method;
  r.path = path;
  r.body = body;
  if (!token.empty()) r.authorization = Bearer(token);
  return r;
}

// A raw connection: held open, dropped without a word (as a client that went away), its answer's
// status read once it comes.
class RawConnection {
 public:
  RawConnection(int port, const std::string& request) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd_ < 0 || ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::send(fd_, request.data(), request.size(), MSG_NOSIGNAL) !=
            static_cast<ssize_t>(request.size())) {
      Close();
    }
  }
  ~RawConnection() { Close(); }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  // The status of the answer's first line, once it has come (0: none within `timeout`).
  int Status(std::chrono::milliseconds timeout) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (fd_ >= 0 && head_.find("\r\n") == std::string::npos &&
           std::chrono::steady_clock::now() < end) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      char buffer[512];
      const ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
      if (n <= 0) break;
      head_.append(buffer, static_cast<std::size_t>(n));
    }
    if (head_.rfind("HTTP/1.1 ", 0) != 0 || head_.size() < 12) return 0;
    return std::atoi(head_.substr(9, 3).c_str());
  }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
  std::string head_;
};

std::string LongPoll(const std::string& token, std::uint64_t cursor,
                     const std::string& path = "/v1/events?wait=30&cursor=") {
  return fmt::format("GET {}{} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {}\r\n\r\n",
                     path, cursor, token);
}

// ---- The cluster the cases run against ----

struct World {
  TempDir dir;
  std::string config, data;
  std::optional<ServerProcess> server;
  std::unique_ptr<AgentProcess> agents[2];  // n-0, n-1 (n-2 has none)
  std::string credential[2];                // each node's, from its agent's work directory
  std::string node_key;                     // the server's (DATA/node-credentials.key)
  int log_port[2] = {0, 0};                 // each agent's log server
  std::uint64_t run_a = 0, run_b = 0;       // alice's and bob's running jobs
  std::uint64_t held = 0, pending = 0;      // alice's held and pending ones
  int a = 0, b = 1;                         // the nodes (0 or 1) run_a and run_b run on
  std::int64_t start_a = 0, start_b = 0;    // their runs
  std::string error;                        // why the world could not be made

  int port() const { return server->port(); }
  std::string address() const { return server->address(); }
  std::string Node(int i) const { return "n-" + std::to_string(i); }
  std::string Cred(int i) const { return credential[i]; }
  std::string LogToken(int i) const { return crypto::HmacSha256Hex(node_key, "logs:" + Node(i)); }
  Answer Api(const std::string& token, const std::string& method, const std::string& path,
             const std::string& body = "") const {
    return Send(port(), Req(token, method, path, body));
  }
  std::string Job(std::uint64_t id) const { return "/v1/jobs/" + std::to_string(id); }
};

std::string ReadFirstLine(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
  return line;
}

// The port of an agent's log server, from its output ("logs on http://127.0.0.1:PORT").
int LogPort(const std::string& out_file) {
  std::ifstream in(out_file);
  const std::string key = "logs on http://127.0.0.1:";
  for (std::string line; std::getline(in, line);) {
    if (const auto at = line.find(key); at != std::string::npos)
      return std::atoi(line.c_str() + at + key.size());
  }
  return 0;
}

// A task that says it started, then waits until the test's process or directory is gone (tasks
// outlive their agents by design: this one does not outlive the test).
std::string TaskCommand(const World& w) {
  return fmt::format(
      "echo hostile-task-up; while kill -0 {} 2>/dev/null && [ -d '{}' ]; do sleep 0.5; done",
      ::getpid(), w.dir.path().string());
}

std::string JobState(const World& w, std::uint64_t id) {
  return w.Api(kAdmin, "GET", w.Job(id)).json["status"].value("state", "?");
}

std::unique_ptr<World> MakeWorld() {
  auto w = std::make_unique<World>();
  w->config = w->dir.Write("cluster.yaml", ClusterYaml());
  w->data = (w->dir.path() / "data").string();
  w->server.emplace(w->config, w->data, std::vector<std::string>{});
  if (!w->server->ready()) {
    w->error = "the server did not start";
    return w;
  }
  for (int i = 0; i < 2; ++i) {
    w->agents[i] = std::make_unique<AgentProcess>(w->address(), kJoin, w->Node(i), "2xG-40G",
                                                  (w->dir.path() / w->Node(i)).string());
  }
  const auto ready = [&] {
    int n = 0;
    for (const Json& node : w->Api(kAdmin, "GET", "/v1/nodes").json.value("nodes", Json::array()))
      n += node["agent"].is_object() && node["agent"]["state"] == "ready";
    return n == 2;
  };
  if (!WaitFor(ready)) {
    w->error = "the agents did not register: " + w->Api(kAdmin, "GET", "/v1/nodes").text;
    return w;
  }
  // Each agent keeps its credential once the server has answered its registration.
  for (int i = 0; i < 2; ++i) {
    if (!WaitFor([&] {
          w->credential[i] = ReadFirstLine(w->dir.path() / w->Node(i) / "node-credential");
          return w->credential[i].rfind("arbiter-node." + w->Node(i) + ".", 0) == 0;
        })) {
      w->error += "no credential for " + w->Node(i) + "; ";
    }
    w->log_port[i] = LogPort((w->dir.path() / w->Node(i)).string() + ".out");
  }
  w->node_key = ReadFirstLine(std::filesystem::path(w->data) / "node-credentials.key");
  const auto submit = [&](const char* token, const std::string& name, const char* cls, int tasks,
                          const std::string& command) -> std::uint64_t {
    const Json job{{"name", name},
                   {"queue", "main"},
                   {"priority_class", cls},
                   {"command", command},
                   {"groups", Json::array({{{"tasks", tasks}, {"gpu_milli", 2000}}})}};
    const Answer a = w->Api(token, "POST", "/v1/jobs", job.dump());
    if (a.status != 201) w->error += "submit " + name + ": " + a.text;
    return a.status == 201 ? a.json["id"].get<std::uint64_t>() : 0;
  };
  // A node each: n-2 has no agent, so that nothing else can start.
  w->run_a = submit(kAlice, "alice-runs", "P1", 1, TaskCommand(*w));
  if (!WaitFor([&] { return JobState(*w, w->run_a) == "running"; })) w->error += "run_a; ";
  w->run_b = submit(kBob, "bob-runs", "P1", 1, TaskCommand(*w));
  if (!WaitFor([&] { return JobState(*w, w->run_b) == "running"; })) w->error += "run_b; ";
  w->held = submit(kAlice, "alice-held", "P2", 2, "true");
  if (w->Api(kAlice, "POST", w->Job(w->held) + "/hold").status != 200) w->error += "hold; ";
  w->pending = submit(kAlice, "alice-pending", "P2", 2, "true");
  // Placed and told: its reason is the engine's, no longer "waiting for the next cycle".
  if (!WaitFor([&] {
        return w->Api(kAdmin, "GET", w->Job(w->pending)).json.value("reason", "").find("fit") !=
               std::string::npos;
      }))
    w->error += "pending; ";
  const Json a = w->Api(kAdmin, "GET", w->Job(w->run_a)).json;
  const Json b = w->Api(kAdmin, "GET", w->Job(w->run_b)).json;
  if (!a.contains("status") || !b.contains("status")) return w;
  w->a = a["status"]["allocation"]["tasks"][0]["node"] == "n-0" ? 0 : 1;
  w->b = 1 - w->a;
  w->start_a = a["status"]["start_time_ms"].get<std::int64_t>();
  w->start_b = b["status"]["start_time_ms"].get<std::int64_t>();
  if (b["status"]["allocation"]["tasks"][0]["node"] != w->Node(w->b))
    w->error += "both jobs on one node; ";
  // Both tasks have started (their first line is in their logs).
  if (!WaitFor([&] {
        const CommandResult r =
            RunCli(w->address(), kAdmin, fmt::format("logs {} --task 0", w->run_b));
        return r.output.find("hostile-task-up") != std::string::npos;
      }))
    w->error += "the task's log; ";
  return w;
}

// One world for every test of the process.
World* Shared() {
  static std::unique_ptr<World> world = MakeWorld();
  return world.get();
}

// ---- State before and after ----

// What must not change: every job, queue and node and the event log, without what changes with
// time alone (a node's last contact with its agent, a queue's decayed usage).
Json Snapshot(const World& w) {
  Json jobs = w.Api(kAdmin, "GET", "/v1/jobs?limit=10000").json;
  Json queues = w.Api(kAdmin, "GET", "/v1/queues").json;
  Json nodes = w.Api(kAdmin, "GET", "/v1/nodes").json;
  Json events = w.Api(kAdmin, "GET", "/v1/events?cursor=0&limit=10000").json;
  if (queues.is_object()) {
    for (Json& q : queues["queues"]) q.erase("recent_gpu_seconds");
  }
  if (nodes.is_object()) {
    for (Json& n : nodes["nodes"]) {
      if (n["agent"].is_object()) n["agent"].erase("last_seen_ms");
    }
  }
  return Json{{"jobs", jobs}, {"queues", queues}, {"nodes", nodes}, {"events", events}};
}

// The code of an error body for a status (docs/api.md, "Errors").
std::string CodeOf(int status) {
  switch (status) {
    case 400:
      return "invalid_argument";
    case 401:
      return "unauthenticated";
    case 403:
      return "permission_denied";
    case 404:
      return "not_found";
    case 409:
      return "conflict";
    case 429:
      return "resource_exhausted";
  }
  return "?";
}

// ---- The tables ----

struct Case {
  std::string name;
  std::function<Request(const World&)> request;
  int status;
  std::string field;  // the error's (every status of 400 and above)
};

void RunCases(const std::vector<Case>& cases) {
  World* w = Shared();
  ASSERT_TRUE(w && w->error.empty()) << (w ? w->error : "no world");
  for (const Case& c : cases) {
    SCOPED_TRACE("case " + c.name);
    const Request request = c.request(*w);
    const Json before = Snapshot(*w);
    const Answer got = Send(w->port(), request);
    EXPECT_EQ(got.status, c.status) << c.name << ": " << got.text.substr(0, 600);
    if (c.status >= 400) {
      const bool error =
          got.json.is_object() && got.json.contains("error") && got.json["error"].is_object();
      EXPECT_TRUE(error) << c.name << ": not an error body: " << got.text.substr(0, 600);
      if (error) {
        const Json& e = got.json["error"];
        EXPECT_EQ(e.value("field", "?"), c.field) << c.name << ": " << got.text.substr(0, 600);
        EXPECT_EQ(e.value("code", "?"), CodeOf(c.status)) << c.name;
        EXPECT_FALSE(e.value("message", "").empty()) << c.name;
      }
    }
    // Still serving, and nothing changed.
    ASSERT_EQ(Send(w->port(), Req("", "GET", "/healthz")).status, 200) << c.name << " killed it";
    const Json after = Snapshot(*w);
    EXPECT_TRUE(before == after) << c.name << " changed the state: " << Json::diff(before, after);
  }
  std::cout << "[ info     ] " << cases.size() << " cases\n";
}

// Bodies.
std::string JobBody(const std::string& name_json, const std::string& more = "",
                    const std::string& group = R"({"tasks": 1, "gpu_milli": 1000})") {
  return R"({"name": )" + name_json +
         R"(, "queue": "main", "priority_class": "P1", "command": "true", "groups": [)" + group +
         "]" + (more.empty() ? "" : ", " + more) + "}";
}
std::string Job(const std::string& more) { return JobBody(R"("x")", more); }
std::string Group(const std::string& group) { return JobBody(R"("x")", "", group); }
constexpr const char* kDevices =
    R"("devices": [{"model": "G", "memory_mib": 40960}, {"model": "G", "memory_mib": 40960}])";
std::string Register(const std::string& more = "") {
  return std::string("{") + kDevices + (more.empty() ? "" : ", " + more) + "}";
}
std::string Report(std::uint64_t job, std::int64_t run, const std::string& more = "") {
  return fmt::format(R"({{"revision": "", "tasks": [{{"job": {}, "rank": 0, "run": {}{}}}]}})", job,
                     run, more.empty() ? "" : ", " + more);
}
std::string Nested(std::size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }
std::string Repeat(const std::string& s, std::size_t n) {
  std::string out;
  for (std::size_t i = 0; i < n; ++i) out += (i ? "," : "") + s;
  return out;
}

std::string SyncPath(const World& w, int i) { return "/v1/nodes/" + w.Node(i) + "/sync"; }
std::string RegisterPath(const std::string& node) { return "/v1/nodes/" + node + "/register"; }

// Node identity: a node's credential speaks for its node alone, a join token only registers (the
// nodes it names, none a live agent holds), other roles never speak for a node; and a report of a
// task the server did not place on the node changes nothing.
TEST(HostileAgents, CrossNodeReportsAndRegistrationsAreRefused) {
  RunCases({
      {"node A's credential syncs node B, saying B's task exited 0",
       [](const World& w) {
         return Req(w.Cred(w.a), "POST", SyncPath(w, w.b),
                    Report(w.run_b, w.start_b, R"("running": false, "exit_code": 0)"));
       },
       403, "node"},
      {"node A's credential registers node B",
       [](const World& w) {
         return Req(w.Cred(w.a), "POST", RegisterPath(w.Node(w.b)), Register());
       },
       403, "node"},
      {"node A's credential registers the agentless n-2",
       [](const World& w) { return Req(w.Cred(0), "POST", RegisterPath("n-2"), Register()); }, 403,
       "node"},
      {"node A's credential registers a node not configured",
       [](const World& w) { return Req(w.Cred(0), "POST", RegisterPath("n-9"), Register()); }, 403,
       "node"},
      {"node A reports B's task as exited 0 in its own sync: ignored",
       [](const World& w) {
         return Req(w.Cred(w.a), "POST", SyncPath(w, w.a),
                    Report(w.run_b, w.start_b, R"("running": false, "exit_code": 0)"));
       },
       200, ""},
      {"node A reports B's task as lost in its own sync: ignored",
       [](const World& w) {
         return Req(w.Cred(w.a), "POST", SyncPath(w, w.a),
                    Report(w.run_b, w.start_b, R"("running": false, "lost": true)"));
       },
       200, ""},
      {"a report of its own job's earlier run: ignored",
       [](const World& w) {
         return Req(w.Cred(w.a), "POST", SyncPath(w, w.a),
                    Report(w.run_a, w.start_a - 1, R"("running": false, "exit_code": 0)"));
       },
       200, ""},
      {"a report of a rank its own job does not have: ignored",
       [](const World& w) {
         return Req(w.Cred(w.a), "POST", SyncPath(w, w.a),
                    fmt::format(R"({{"tasks": [{{"job": {}, "rank": 7, "run": {}, "running": false,
                                    "exit_code": 0}}]}})",
                                w.run_a, w.start_a));
       },
       200, ""},
      {"a report of a held job: ignored",
       [](const World& w) {
         return Req(w.Cred(w.a), "POST", SyncPath(w, w.a),
                    Report(w.held, 0, R"("running": false, "exit_code": 0)"));
       },
       200, ""},
      {"a report of a job that does not exist: ignored",
       [](const World& w) {
         return Req(w.Cred(w.a), "POST", SyncPath(w, w.a),
                    Report(999999, w.start_a, R"("running": true, "checkpoint_ms": 5)"));
       },
       200, ""},
      {"a join token syncs a live node",
       [](const World& w) { return Req(kJoin, "POST", SyncPath(w, 0), R"({"revision": ""})"); },
       403, "node"},
      {"a join token syncs the agentless n-2",
       [](const World&) { return Req(kJoin, "POST", "/v1/nodes/n-2/sync", R"({"revision": ""})"); },
       403, "node"},
      {"a join token for n-0 registers n-2",
       [](const World&) { return Req(kJoinN0, "POST", RegisterPath("n-2"), Register()); }, 403,
       "node"},
      {"a join token registers a node not configured",
       [](const World&) { return Req(kJoin, "POST", RegisterPath("n-9"), Register()); }, 404,
       "node"},
      {"an admin token syncs a node",
       [](const World& w) { return Req(kAdmin, "POST", SyncPath(w, 0), R"({"revision": ""})"); },
       403, ""},
      {"an admin token registers the agentless n-2",
       [](const World&) { return Req(kAdmin, "POST", RegisterPath("n-2"), Register()); }, 403, ""},
      {"a user token syncs a node, saying its task exited 0",
       [](const World& w) {
         return Req(kBob, "POST", SyncPath(w, w.b),
                    Report(w.run_b, w.start_b, R"("running": false, "exit_code": 0)"));
       },
       403, ""},
      {"a user token registers a live node",
       [](const World&) { return Req(kAlice, "POST", RegisterPath("n-0"), Register()); }, 403, ""},
      {"a node's credential submits a job",
       [](const World& w) { return Req(w.Cred(0), "POST", "/v1/jobs", Job("")); }, 403, ""},
      {"a join token submits a job",
       [](const World&) { return Req(kJoin, "POST", "/v1/jobs", Job("")); }, 403, ""},
      {"a node's credential cancels a job",
       [](const World& w) { return Req(w.Cred(w.a), "DELETE", w.Job(w.run_a)); }, 403, ""},
      {"a node's credential cordons its node",
       [](const World& w) { return Req(w.Cred(0), "POST", "/v1/nodes/n-0/cordon", "{}"); }, 403,
       ""},
  });
}

// The addresses an agent gives are the address it connects from, and a join token takes no node
// a live agent holds.
TEST(HostileAgents, ForgedLogAddressesAndTakeoversAreRefused) {
  RunCases({
      {"a node's credential gives another machine's address",
       [](const World& w) {
         return Req(w.Cred(0), "POST", RegisterPath("n-0"), Register(R"("address": "192.0.2.7")"));
       },
       403, "address"},
      {"a node's credential gives another machine's log server",
       [](const World& w) {
         return Req(w.Cred(0), "POST", RegisterPath("n-0"),
                    Register(R"("address": "127.0.0.1", "log_url": "http://192.0.2.7:8080")"));
       },
       403, "log_url"},
      {"a node's credential gives an IPv6 log server elsewhere",
       [](const World& w) {
         return Req(w.Cred(1), "POST", RegisterPath("n-1"),
                    Register(R"("log_url": "https://[2001:db8::7]:8443")"));
       },
       403, "log_url"},
      {"a join token registers n-2 at another machine's address",
       [](const World&) {
         return Req(kJoin, "POST", RegisterPath("n-2"), Register(R"("address": "203.0.113.9")"));
       },
       403, "address"},
      {"a join token registers n-2 with another machine's log server",
       [](const World&) {
         return Req(kJoin, "POST", RegisterPath("n-2"),
                    Register(R"("log_url": "http://203.0.113.9:40000")"));
       },
       403, "log_url"},
      {"a log URL with a user part",
       [](const World&) {
         return Req(kJoin, "POST", RegisterPath("n-2"),
                    Register(R"("log_url": "http://evil@127.0.0.1:40000")"));
       },
       400, "log_url"},
      {"a log URL with a path",
       [](const World& w) {
         return Req(w.Cred(0), "POST", RegisterPath("n-0"),
                    Register(R"("log_url": "http://127.0.0.1:40000/steal")"));
       },
       400, "log_url"},
      {"a log URL of another scheme",
       [](const World&) {
         return Req(kJoin, "POST", RegisterPath("n-2"),
                    Register(R"("log_url": "file:///etc/passwd")"));
       },
       400, "log_url"},
      {"a join token registers n-2 at the wildcard address",
       [](const World&) {
         return Req(kJoin, "POST", RegisterPath("n-2"), Register(R"("address": "0.0.0.0")"));
       },
       403, "address"},
      {"a join token takes a live node",
       [](const World&) { return Req(kJoin, "POST", RegisterPath("n-0"), Register()); }, 409,
       "node"},
      {"the join token of n-0 takes it while its agent lives",
       [](const World&) { return Req(kJoinN0, "POST", RegisterPath("n-0"), Register()); }, 409,
       "node"},
      {"a join token takes a live node from another address",
       [](const World&) {
         return Req(kJoin, "POST", RegisterPath("n-1"), Register(R"("address": "198.51.100.1")"));
       },
       403, "address"},
  });
}

// Every field of a registration with a wrong JSON type or out of range, and unknown fields: 400
// naming the field, never 500, and the node unchanged (n-2, without an agent, stays waiting).
TEST(HostileAgents, MalformedRegistrationsAreRefusedNamingTheField) {
  const auto join = [](const std::string& body) {
    return [body](const World&) { return Req(kJoin, "POST", RegisterPath("n-2"), body); };
  };
  const auto own = [](const std::string& body) {
    return [body](const World& w) { return Req(w.Cred(0), "POST", RegisterPath("n-0"), body); };
  };
  RunCases({
      {"devices: an object", join(R"({"devices": {"model": "G"}})"), 400, "devices"},
      {"devices: a number in the list", join(R"({"devices": [1, 2]})"), 400, "devices[0]"},
      {"devices[0].model: a number", own(R"({"devices": [{"model": 5}]})"), 400,
       "devices[0].model"},
      {"devices[1].memory_mib: a string",
       join(R"({"devices": [{"model": "G"}, {"model": "G", "memory_mib": "40960"}]})"), 400,
       "devices[1].memory_mib"},
      {"devices[0].nvlink_group: a float",
       own(R"({"devices": [{"model": "G", "nvlink_group": 0.5}]})"), 400,
       "devices[0].nvlink_group"},
      {"devices[0]: an unknown field", join(R"({"devices": [{"model": "G", "pci": "00:01"}]})"),
       400, "devices[0].pci"},
      {"devices: more than a node may have",
       join("{\"devices\": [" + Repeat(R"({"model": "G"})", 257) + "]}"), 400, "devices"},
      {"cpu_milli: a string", join(Register(R"("cpu_milli": "2000")")), 400, "cpu_milli"},
      {"cpu_milli: negative", own(Register(R"("cpu_milli": -1)")), 400, "cpu_milli"},
      {"cpu_milli: 2^63-1", join(Register(R"("cpu_milli": 9223372036854775807)")), 400,
       "cpu_milli"},
      {"memory_mib: true", join(Register(R"("memory_mib": true)")), 400, "memory_mib"},
      {"memory_mib: 1e3", own(Register(R"("memory_mib": 1e3)")), 400, "memory_mib"},
      {"labels: a list", join(Register(R"("labels": ["zone=a"])")), 400, "labels"},
      {"labels.zone: a number", own(Register(R"("labels": {"zone": 7})")), 400, "labels.zone"},
      {"65 labels",
       join(Register("\"labels\": {" +
                     [] {
                       std::string s;
                       for (int i = 0; i < 65; ++i)
                         s += fmt::format("{}\"k{}\": \"v\"", i ? ", " : "", i);
                       return s;
                     }() +
                     "}")),
       400, "labels"},
      {"address: a number", join(Register(R"("address": 2130706433)")), 400, "address"},
      {"hostname: a list", own(Register(R"("hostname": ["a"])")), 400, "hostname"},
      {"log_url: false", join(Register(R"("log_url": false)")), 400, "log_url"},
      {"an unknown field", join(Register(R"("role": "admin")")), 400, "role"},
      {"a list for a body", join("[]"), 400, "body"},
      {"an empty body", join(""), 400, "body"},
      {"malformed JSON", own(R"({"devices": [)"), 400, "body"},
  });
}

// Every field of a sync with a wrong JSON type or out of range, and unknown fields.
TEST(HostileAgents, MalformedSyncsAreRefusedNamingTheField) {
  const auto sync = [](const std::string& body, const std::string& query = "") {
    return [body, query](const World& w) {
      return Req(w.Cred(w.a), "POST", SyncPath(w, w.a) + query, body);
    };
  };
  // A report of the node's own task: valid but for one field.
  const auto task = [](const std::string& fields) {
    return [fields](const World& w) {
      return Req(
          w.Cred(w.a), "POST", SyncPath(w, w.a),
          fmt::format(R"({{"revision": "", "tasks": [{{"job": {}, "rank": 0, "run": {}, {}}}]}})",
                      w.run_a, w.start_a, fields));
    };
  };
  RunCases({
      {"revision: a number", sync(R"({"revision": -1})"), 400, "revision"},
      {"revision: a list", sync(R"({"revision": ["41"]})"), 400, "revision"},
      {"revision: 1 KB", sync("{\"revision\": \"" + std::string(1024, 'a') + "\"}"), 400,
       "revision"},
      {"tasks: an object", sync(R"({"tasks": {"job": 1}})"), 400, "tasks"},
      {"tasks[0]: a number", sync(R"({"tasks": [7]})"), 400, "tasks[0]"},
      {"tasks[0].job: a string", sync(R"({"tasks": [{"job": "1", "rank": 0, "run": 1}]})"), 400,
       "tasks[0].job"},
      {"tasks[0].job: 0", sync(R"({"tasks": [{"job": 0, "rank": 0, "run": 1}]})"), 400,
       "tasks[0].job"},
      {"tasks[0].job: 2^64-1",
       sync(R"({"tasks": [{"job": 18446744073709551615, "rank": 0, "run": 1}]})"), 400,
       "tasks[0].job"},
      {"tasks[0].job: missing", sync(R"({"tasks": [{"rank": 0, "run": 1}]})"), 400, "tasks[0].job"},
      {"tasks[0].rank: negative", sync(R"({"tasks": [{"job": 1, "rank": -1, "run": 1}]})"), 400,
       "tasks[0].rank"},
      {"tasks[0].rank: 2^32", sync(R"({"tasks": [{"job": 1, "rank": 4294967296, "run": 1}]})"), 400,
       "tasks[0].rank"},
      {"tasks[0].run: a string", sync(R"({"tasks": [{"job": 1, "rank": 0, "run": "now"}]})"), 400,
       "tasks[0].run"},
      {"tasks[0].run: 2^63-1",
       sync(R"({"tasks": [{"job": 1, "rank": 0, "run": 9223372036854775807}]})"), 400,
       "tasks[0].run"},
      {"tasks[0].running: a string (of its own task)", task(R"("running": "no")"), 400,
       "tasks[0].running"},
      {"tasks[0].exit_code: a float (of its own task)",
       task(R"("running": false, "exit_code": 0.5)"), 400, "tasks[0].exit_code"},
      {"tasks[0].exit_code: 2^31", task(R"("running": false, "exit_code": 2147483648)"), 400,
       "tasks[0].exit_code"},
      {"tasks[0].signal: 999", task(R"("running": false, "signal": 999)"), 400, "tasks[0].signal"},
      {"tasks[0].lost: 1 (of its own task)", task(R"("running": false, "lost": 1)"), 400,
       "tasks[0].lost"},
      {"tasks[0].checkpoint_ms: -2", task(R"("checkpoint_ms": -2)"), 400, "tasks[0].checkpoint_ms"},
      {"tasks[0].checkpoint_ms: a string", task(R"("checkpoint_ms": "1796000000000")"), 400,
       "tasks[0].checkpoint_ms"},
      {"tasks[0]: an unknown field (of its own task)", task(R"("running": false, "pid": 1)"), 400,
       "tasks[0].pid"},
      {"a good report then a bad one: neither is taken",
       [](const World& w) {
         return Req(w.Cred(w.a), "POST", SyncPath(w, w.a),
                    fmt::format(R"({{"tasks": [{{"job": {}, "rank": 0, "run": {}, "running": false,
                                    "exit_code": 0}}, {{"job": 1, "rank": "0", "run": 1}}]}})",
                                w.run_a, w.start_a));
       },
       400, "tasks[1].rank"},
      {"an unknown field", sync(R"({"revision": "", "node": "n-2"})"), 400, "node"},
      {"a string for a body", sync(R"("sync")"), 400, "body"},
      {"an empty body", sync(""), 400, "body"},
      {"wait_ms above a minute", sync(R"({"revision": ""})", "?wait_ms=600001"), 400, "wait_ms"},
      {"wait_ms negative", sync(R"({"revision": ""})", "?wait_ms=-1"), 400, "wait_ms"},
  });
}

// Who is calling: missing, malformed, unknown, expired and forged tokens are 401.
TEST(HostileAuth, BadTokensAre401) {
  const auto with = [](std::optional<std::string> authorization, std::string method = "GET",
                       std::string path = "/v1/jobs", std::string body = "") {
    return [=](const World&) {
      Request r;
      r.method = method;
      r.path = path;
      r.body = body;
      r.authorization = authorization;
      return r;
    };
  };
  const std::string wrong_mac(64, 'a');
  RunCases({
      {"no Authorization", with(std::nullopt), 401, "Authorization"},
      {"Basic credentials", with("Basic YWRtaW46YWRtaW4="), 401, "Authorization"},
      {"Bearer without a token", with("Bearer"), 401, "Authorization"},
      {"bearer in lower case", with(std::string("bearer ") + kAdmin), 401, "Authorization"},
      {"a token with a character more", with(Bearer(std::string(kAdmin) + "x")), 401,
       "Authorization"},
      {"a token of another server", with(Bearer("example-admin-token")), 401, "Authorization"},
      {"a user token past its expiry submits", with(Bearer(kLate), "POST", "/v1/jobs", Job("")),
       401, "Authorization"},
      {"a join token past its expiry registers n-2",
       with(Bearer(kJoinLate), "POST", "/v1/nodes/n-2/register", Register()), 401, "Authorization"},
      {"a forged credential of n-0 syncs it",
       with(Bearer("arbiter-node.n-0." + wrong_mac), "POST", "/v1/nodes/n-0/sync", "{}"), 401,
       "Authorization"},
      {"a forged credential of n-2 registers it",
       with(Bearer("arbiter-node.n-2." + wrong_mac), "POST", "/v1/nodes/n-2/register", Register()),
       401, "Authorization"},
      {"a credential of a node not configured",
       with(Bearer("arbiter-node.n-9." + wrong_mac), "GET", "/v1/nodes"), 401, "Authorization"},
      {"a credential cut short",
       [](const World& w) {
         return Req(w.Cred(0).substr(0, w.Cred(0).size() - 1), "POST", "/v1/nodes/n-0/sync", "{}");
       },
       401, "Authorization"},
      {"n-0's credential renamed to n-1",
       [](const World& w) {
         std::string forged = w.Cred(0);
         forged.replace(forged.find("n-0"), 3, "n-1");
         return Req(forged, "POST", "/v1/nodes/n-1/sync", "{}");
       },
       401, "Authorization"},
      {"a node's log token as a bearer token",
       [](const World& w) { return Req(w.LogToken(0), "GET", "/v1/nodes"); }, 401, "Authorization"},
      {"the prefix alone", with(Bearer("arbiter-node.")), 401, "Authorization"},
  });
}

// Priority classes a token does not list, at submission and afterwards; releasing a held job
// (an admin's); another user's jobs; an admin's operations.
TEST(HostileJobs, ClassEscalationAndOthersJobsAreRefused) {
  RunCases({
      {"alice submits at P0, which her token does not list",
       [](const World&) {
         return Req(kAlice, "POST", "/v1/jobs",
                    R"({"name": "x", "queue": "main", "priority_class": "P0", "command": "true",
                        "groups": [{"gpu_milli": 1000}]})");
       },
       403, "priority_class"},
      {"carol submits at P1 to her own queue",
       [](const World&) {
         return Req(kCarol, "POST", "/v1/jobs",
                    R"({"name": "x", "queue": "other", "priority_class": "P1", "command": "true",
                        "groups": [{"gpu_milli": 1000}]})");
       },
       403, "priority_class"},
      {"alice raises her running job to P0",
       [](const World& w) {
         return Req(kAlice, "PATCH", w.Job(w.run_a), R"({"priority_class": "P0"})");
       },
       403, "priority_class"},
      {"alice raises her held job to P0",
       [](const World& w) {
         return Req(kAlice, "PATCH", w.Job(w.held), R"({"priority_class": "P0"})");
       },
       403, "priority_class"},
      {"alice changes the class and holds in one call",
       [](const World& w) {
         return Req(kAlice, "PATCH", w.Job(w.pending),
                    R"({"priority_class": "P1", "state": "held"})");
       },
       400, "state"},
      {"alice releases her held job",
       [](const World& w) { return Req(kAlice, "POST", w.Job(w.held) + "/release"); }, 403, ""},
      {"alice submits to a queue she may not use",
       [](const World&) {
         return Req(kAlice, "POST", "/v1/jobs",
                    R"({"name": "x", "queue": "other", "priority_class": "P2", "command": "true",
                        "groups": [{"gpu_milli": 1000}]})");
       },
       403, "queue"},
      {"alice submits to the parent queue",
       [](const World&) {
         return Req(kAlice, "POST", "/v1/jobs",
                    R"({"name": "x", "queue": "org", "priority_class": "P2", "command": "true",
                        "groups": [{"gpu_milli": 1000}]})");
       },
       400, "queue"},
      {"alice submits as bob",
       [](const World&) { return Req(kAlice, "POST", "/v1/jobs", Job(R"("user": "bob")")); }, 400,
       "user"},
      {"alice submits with a submit time of her choosing",
       [](const World&) { return Req(kAlice, "POST", "/v1/jobs", Job(R"("submit_time_ms": 1)")); },
       400, "submit_time_ms"},
      {"alice submits a valid job beyond her active jobs",
       [](const World&) { return Req(kAlice, "POST", "/v1/jobs", Job("")); }, 409, "user"},
      {"bob cancels alice's job",
       [](const World& w) { return Req(kBob, "DELETE", w.Job(w.run_a)); }, 403, ""},
      {"bob cancels alice's job (POST)",
       [](const World& w) { return Req(kBob, "POST", w.Job(w.run_a) + "/cancel"); }, 403, ""},
      {"bob holds alice's pending job",
       [](const World& w) { return Req(kBob, "POST", w.Job(w.pending) + "/hold"); }, 403, ""},
      {"bob lowers alice's job",
       [](const World& w) {
         return Req(kBob, "PATCH", w.Job(w.run_a), R"({"priority_class": "P2"})");
       },
       403, ""},
      {"bob releases alice's held job",
       [](const World& w) { return Req(kBob, "POST", w.Job(w.held) + "/release"); }, 403, ""},
      {"alice changes a quota",
       [](const World&) {
         return Req(kAlice, "PUT", "/v1/queues/main/quota", R"({"G": {"nominal_milli": 6000}})");
       },
       403, ""},
      {"alice resets a quota",
       [](const World&) { return Req(kAlice, "DELETE", "/v1/queues/main/quota"); }, 403, ""},
      {"alice drains a node",
       [](const World& w) {
         return Req(kAlice, "POST", "/v1/nodes/" + w.Node(w.b) + "/drain", "{}");
       },
       403, ""},
  });
}

// Bodies nested too deeply (33 levels, and 200,000: a recursive parser's stack) and bodies above
// server.max_body_bytes, to every endpoint that takes a body.
TEST(HostileBodies, DeepAndOversizedBodiesAre400AndTheServerLives) {
  const std::string deep33 = "{\"labels\": " + Nested(32) + "}";  // 33 levels with the object
  const std::string deep200k = Nested(200000);
  const std::string huge = "{\"labels\": \"" + std::string(kMaxBody, 'a') + "\"}";
  const auto to = [](std::string token, std::string method, std::string path, std::string body) {
    return [=](const World& w) {
      return Req(token == "cred" ? w.Cred(0) : token, method, path, body);
    };
  };
  RunCases({
      {"register, 33 levels", to("cred", "POST", "/v1/nodes/n-0/register", deep33), 400, "body"},
      {"register of n-2, 200,000 levels", to(kJoin, "POST", "/v1/nodes/n-2/register", deep200k),
       400, "body"},
      {"sync, 33 levels", to("cred", "POST", "/v1/nodes/n-0/sync", deep33), 400, "body"},
      {"sync, 200,000 levels", to("cred", "POST", "/v1/nodes/n-0/sync", deep200k), 400, "body"},
      {"quota, 33 levels", to(kAdmin, "PUT", "/v1/queues/main/quota", deep33), 400, "body"},
      {"quota, 200,000 levels", to(kAdmin, "PUT", "/v1/queues/main/quota", deep200k), 400, "body"},
      {"class change, 200,000 levels", to(kAdmin, "PATCH", "/v1/jobs/1", deep200k), 400, "body"},
      {"cordon, 200,000 levels", to(kAdmin, "POST", "/v1/nodes/n-2/cordon", deep200k), 400, "body"},
      // A job spec is read into types as it is parsed: the first value of a wrong type stops it.
      {"job, 33 levels in its labels",
       to(kAdmin, "POST", "/v1/jobs", Job("\"labels\": " + Nested(32))), 400, "labels"},
      {"job, 200,000 levels", to(kAdmin, "POST", "/v1/jobs", deep200k), 400, "body"},
      {"job, 200,000 levels in its groups",
       to(kAdmin, "POST", "/v1/jobs", JobBody(R"("x")", "", Nested(200000))), 400, "groups[0]"},
      {"job above max_body_bytes", to(kAdmin, "POST", "/v1/jobs", huge), 400, "body"},
      {"register above max_body_bytes", to("cred", "POST", "/v1/nodes/n-0/register", huge), 400,
       "body"},
      {"sync above max_body_bytes", to("cred", "POST", "/v1/nodes/n-0/sync", huge), 400, "body"},
      {"quota above max_body_bytes", to(kAdmin, "PUT", "/v1/queues/main/quota", huge), 400, "body"},
      {"an Authorization header of 20,000 bytes",
       [](const World&) { return Req(std::string(20000, 'a'), "GET", "/v1/jobs"); }, 400,
       "headers"},
  });
}

// Control and invisible formatting characters, invalid UTF-8, names of 1 MB and names or labels
// that break Kubernetes' rules, wherever a text is taken.
TEST(HostileText, ControlCharactersBadUtf8AndBadNamesAre400) {
  const auto submit = [](const std::string& body) {
    return [body](const World&) { return Req(kAlice, "POST", "/v1/jobs", body); };
  };
  RunCases({
      {"name with ESC (ANSI colour)", submit(JobBody(R"("ok\u001b[31mred")")), 400, "name"},
      {"name with NUL", submit(JobBody(R"("a\u0000b")")), 400, "name"},
      {"name with U+202E (right-to-left override)", submit(JobBody(R"("txt\u202egnp")")), 400,
       "name"},
      {"name with U+200B (zero width space)", submit(JobBody(R"("a\u200bb")")), 400, "name"},
      {"name with U+009B (C1 CSI)", submit(JobBody(R"("a\u009bb")")), 400, "name"},
      {"name with U+FEFF", submit(JobBody(R"("\ufeffa")")), 400, "name"},
      {"name with a newline", submit(JobBody(R"("a\nb")")), 400, "name"},
      {"name with a raw invalid UTF-8 byte",
       submit(JobBody("\"a\xff"
                      "b\"")),
       400, "body"},
      {"name with an overlong UTF-8 '/'",
       submit(JobBody("\"a\xc0\xaf"
                      "b\"")),
       400, "body"},
      {"name with a lone surrogate", submit(JobBody(R"("a\ud800b")")), 400, "body"},
      {"name of 300,000 bytes", submit(JobBody("\"" + std::string(300000, 'a') + "\"")), 400,
       "name"},
      {"name of 1 MB (above max_body_bytes)",
       submit(JobBody("\"" + std::string(1 << 20, 'a') + "\"")), 400, "body"},
      {"name of 254 bytes", submit(JobBody("\"" + std::string(254, 'a') + "\"")), 400, "name"},
      {"name beginning with '-'", submit(JobBody(R"("-rf")")), 400, "name"},
      {"name with a space", submit(JobBody(R"("a b")")), 400, "name"},
      {"name with '/'", submit(JobBody(R"("../../etc")")), 400, "name"},
      {"name in full-width letters", submit(JobBody(R"("ｅｖｉｌ")")), 400, "name"},
      {"empty name", submit(JobBody(R"("")")), 400, "name"},
      {"group name with U+2066", submit(Group(R"({"name": "g\u2066", "gpu_milli": 1000})")), 400,
       "groups[0].name"},
      {"label key with a space", submit(Job(R"("labels": {"team name": "a"})")), 400, "labels"},
      {"label key with an upper-case prefix", submit(Job(R"("labels": {"Example.COM/team": "a"})")),
       400, "labels"},
      {"label key of 64 characters",
       submit(Job("\"labels\": {\"" + std::string(64, 'k') + "\": \"a\"}")), 400, "labels"},
      {"label value of 64 characters",
       submit(Job("\"labels\": {\"team\": \"" + std::string(64, 'v') + "\"}")), 400, "labels.team"},
      {"label value ending with '-'", submit(Job(R"("labels": {"team": "a-"})")), 400,
       "labels.team"},
      {"label value with U+202E", submit(Job(R"("labels": {"team": "a\u202eb"})")), 400,
       "labels.team"},
      {"65 labels",
       submit(Job("\"labels\": {" +
                  [] {
                    std::string s;
                    for (int i = 0; i < 65; ++i)
                      s += fmt::format("{}\"k{}\": \"v\"", i ? ", " : "", i);
                    return s;
                  }() +
                  "}")),
       400, "labels"},
      {"node selector key with a control character",
       submit(Job(R"("node_selector": {"zone\u0001": "a"})")), 400, "node_selector"},
      {"env value with ESC", submit(Job(R"("env": {"PS1": "\u001b]0;pwned\u0007"})")), 400,
       "env.PS1"},
      {"env name with NUL", submit(Job(R"("env": {"A\u0000B": "1"})")), 400, "env"},
      {"argv with U+200B",
       submit(R"({"name": "x", "queue": "main", "priority_class": "P1", "argv": ["rm\u200b"],
                  "groups": [{"gpu_milli": 1000}]})"),
       400, "argv[0]"},
      {"command with ESC",
       submit(R"({"name": "x", "queue": "main", "priority_class": "P1", "command": "echo \u001b[2J",
                  "groups": [{"gpu_milli": 1000}]})"),
       400, "command"},
      {"queue with NUL",
       submit(R"({"name": "x", "queue": "main\u0000", "priority_class": "P1", "command": "true",
                  "groups": [{"gpu_milli": 1000}]})"),
       400, "queue"},
      {"idempotency key with ESC", submit(Job(R"("idempotency_key": "k\u001b")")), 400,
       "idempotency_key"},
      {"tolerations key with U+202E",
       submit(Job(R"("tolerations": [{"key": "gpu\u202e", "operator": "Exists"}])")), 400,
       "tolerations[0].key"},
      // The rest of Unicode's format characters (Cf) and the line and paragraph separators.
      {"env value with U+061C (Arabic letter mark, a bidi mark)",
       submit(Job(R"("env": {"V": "a\u061cb"})")), 400, "env.V"},
      {"argv with U+2028 (line separator)",
       submit(R"({"name": "x", "queue": "main", "priority_class": "P1", "argv": ["a\u2028b"],
                  "groups": [{"gpu_milli": 1000}]})"),
       400, "argv[0]"},
      {"command with U+00AD (soft hyphen)",
       submit(R"({"name": "x", "queue": "main", "priority_class": "P1", "command": "r\u00adm",
                  "groups": [{"gpu_milli": 1000}]})"),
       400, "command"},
      {"env value with tag characters (U+E0041, invisible ASCII)",
       submit(Job(R"("env": {"V": "ok\udb40\udc41\udb40\udc42"})")), 400, "env.V"},
      {"idempotency key with U+206A", submit(Job(R"("idempotency_key": "k\u206a")")), 400,
       "idempotency_key"},
      {"register: hostname with U+FFFB (interlinear annotation)",
       [](const World&) {
         return Req(kJoin, "POST", RegisterPath("n-2"), Register(R"("hostname": "h\ufffb")"));
       },
       400, "hostname"},
      {"register: a device name with U+180E",
       [](const World& w) {
         return Req(w.Cred(1), "POST", RegisterPath("n-1"),
                    R"({"devices": [{"model": "G", "name": "x\u180e"}, {"model": "G"}]})");
       },
       400, "devices[0].name"},
      {"register: hostname with ESC",
       [](const World&) {
         return Req(kJoin, "POST", RegisterPath("n-2"), Register(R"("hostname": "h\u001b[2J")"));
       },
       400, "hostname"},
      {"register: a device model with U+202E",
       [](const World& w) {
         return Req(w.Cred(0), "POST", RegisterPath("n-0"),
                    R"({"devices": [{"model": "G\u202e"}, {"model": "G"}]})");
       },
       400, "devices[0].model"},
      {"register: a label value with a newline",
       [](const World&) {
         return Req(kJoin, "POST", RegisterPath("n-2"), Register(R"("labels": {"rack": "r\n3"})"));
       },
       400, "labels.rack"},
      {"register: invalid UTF-8",
       [](const World&) {
         return Req(kJoin, "POST", RegisterPath("n-2"), Register("\"hostname\": \"h\xfe\""));
       },
       400, "body"},
  });
}

// Numbers that overflow, are out of range, or are not integers of the right type.
TEST(HostileNumbers, OverflowingAndOutOfRangeNumbersAre400) {
  const auto submit = [](const std::string& body) {
    return [body](const World&) { return Req(kAlice, "POST", "/v1/jobs", body); };
  };
  RunCases({
      {"runtime_estimate_ms 2^63-1", submit(Job(R"("runtime_estimate_ms": 9223372036854775807)")),
       400, "runtime_estimate_ms"},
      {"runtime_estimate_ms a year and a day", submit(Job(R"("runtime_estimate_ms": 31708800000)")),
       400, "runtime_estimate_ms"},
      {"runtime_estimate_ms 2^64", submit(Job(R"("runtime_estimate_ms": 18446744073709551616)")),
       400, "runtime_estimate_ms"},
      {"runtime_estimate_ms negative", submit(Job(R"("runtime_estimate_ms": -1)")), 400,
       "runtime_estimate_ms"},
      {"runtime_estimate_ms as a string", submit(Job(R"("runtime_estimate_ms": "3600000")")), 400,
       "runtime_estimate_ms"},
      {"runtime_estimate_ms a float", submit(Job(R"("runtime_estimate_ms": 1.5)")), 400,
       "runtime_estimate_ms"},
      {"runtime_estimate_ms 1e400", submit(Job(R"("runtime_estimate_ms": 1e400)")), 400,
       "runtime_estimate_ms"},
      {"checkpoint_interval_ms negative", submit(Job(R"("checkpoint_interval_ms": -60000)")), 400,
       "checkpoint_interval_ms"},
      {"restart_overhead_ms above a year", submit(Job(R"("restart_overhead_ms": 99999999999999)")),
       400, "restart_overhead_ms"},
      {"max_retries above the limit", submit(Job(R"("max_retries": 1000001)")), 400, "max_retries"},
      {"max_retries negative", submit(Job(R"("max_retries": -1)")), 400, "max_retries"},
      {"max_retries true", submit(Job(R"("max_retries": true)")), 400, "max_retries"},
      {"tasks above the limit", submit(Group(R"({"tasks": 1000001, "gpu_milli": 0})")), 400,
       "groups[0].tasks"},
      {"tasks of two groups above the limit together",
       submit(Group(R"({"tasks": 600000, "gpu_milli": 0}, {"tasks": 600000, "gpu_milli": 0})")),
       400, "groups"},
      {"tasks 0", submit(Group(R"({"tasks": 0, "gpu_milli": 1000})")), 400, "groups[0].tasks"},
      {"tasks as a string", submit(Group(R"({"tasks": "2", "gpu_milli": 1000})")), 400,
       "groups[0].tasks"},
      {"tasks 2^63-1", submit(Group(R"({"tasks": 9223372036854775807, "gpu_milli": 1000})")), 400,
       "groups[0].tasks"},
      {"65 task groups", submit(Group(Repeat(R"({"tasks": 1, "gpu_milli": 0})", 65))), 400,
       "groups"},
      {"a GPU share of 1.5 GPUs", submit(Group(R"({"tasks": 1, "gpu_milli": 1500})")), 400,
       "groups[0].gpu_milli"},
      {"a negative GPU share", submit(Group(R"({"tasks": 1, "gpu_milli": -1000})")), 400,
       "groups[0].gpu_milli"},
      {"more GPUs than a node may have", submit(Group(R"({"tasks": 1, "gpu_milli": 257000})")), 400,
       "groups[0].gpu_milli"},
      {"gpu_milli a float", submit(Group(R"({"tasks": 1, "gpu_milli": 1000.0})")), 400,
       "groups[0].gpu_milli"},
      {"cpu_milli above the limit",
       submit(Group(R"({"tasks": 1, "gpu_milli": 1000, "cpu_milli": 1000000000001})")), 400,
       "groups[0].cpu_milli"},
      {"memory_mib 2^63-1",
       submit(Group(R"({"tasks": 1, "gpu_milli": 1000, "memory_mib": 9223372036854775807})")), 400,
       "groups[0].memory_mib"},
      {"gpu_memory_mib negative",
       submit(Group(R"({"tasks": 1, "gpu_milli": 1000, "gpu_memory_mib": -1})")), 400,
       "groups[0].gpu_memory_mib"},
      {"a number for a name", submit(JobBody("5")), 400, "name"},
      {"an object for groups",
       submit(R"({"name": "x", "queue": "main", "priority_class": "P1", "command": "true",
                  "groups": {"tasks": 1, "gpu_milli": 1000}})"),
       400, "groups"},
      {"a number for an env value", submit(Job(R"("env": {"N": 5})")), 400, "env.N"},
      {"4097 arguments",
       submit(R"({"name": "x", "queue": "main", "priority_class": "P1", "groups": [{"gpu_milli":
                  1000}], "argv": [)" +
              Repeat(R"("a")", 4097) + "]}"),
       400, "argv"},
      {"1025 environment variables",
       submit(Job("\"env\": {" +
                  [] {
                    std::string s;
                    for (int i = 0; i < 1025; ++i)
                      s += fmt::format("{}\"V{}\": \"1\"", i ? ", " : "", i);
                    return s;
                  }() +
                  "}")),
       400, "env"},
      {"17 affinity terms",
       submit(
           Job("\"affinity\": [" + Repeat(R"({"match": {"a": "b"}, "level": "node"})", 17) + "]")),
       400, "affinity"},
      {"a number for a class change",
       [](const World& w) {
         return Req(kAdmin, "PATCH", w.Job(w.pending), R"({"priority_class": 0})");
       },
       400, "priority_class"},
      {"a negative quota",
       [](const World&) {
         return Req(kAdmin, "PUT", "/v1/queues/main/quota", R"({"G": {"nominal_milli": -1000}})");
       },
       400, "quota.G.nominal_milli"},
      {"a quota as a string",
       [](const World&) {
         return Req(kAdmin, "PUT", "/v1/queues/main/quota", R"({"G": {"nominal_milli": "1000"}})");
       },
       400, "quota.G.nominal_milli"},
      {"a quota as a float",
       [](const World&) {
         return Req(kAdmin, "PUT", "/v1/queues/main/quota", R"({"G": {"nominal_milli": 0.5}})");
       },
       400, "quota.G.nominal_milli"},
  });
}

// Query parameters and paths: ids and counts that overflow, unknown values.
TEST(HostileQueries, BadParametersAndIdsAre4xx) {
  const auto get = [](std::string path) {
    return [path](const World&) { return Req(kAlice, "GET", path); };
  };
  RunCases({
      {"limit 0", get("/v1/jobs?limit=0"), 400, "limit"},
      {"limit negative", get("/v1/jobs?limit=-1"), 400, "limit"},
      {"limit above 2^64", get("/v1/jobs?limit=99999999999999999999999"), 400, "limit"},
      {"an unknown state", get("/v1/jobs?state=running%1b%5b2J"), 400, "state"},
      {"events: wait above a minute", get("/v1/events?wait=61"), 400, "wait"},
      {"events: a negative cursor", get("/v1/events?cursor=-1"), 400, "cursor"},
      {"events: limit above 10,000", get("/v1/events?limit=10001"), 400, "limit"},
      {"event stream: a cursor that is no number", get("/v1/events/stream?cursor=x"), 400,
       "cursor"},
      {"a job id above 2^64", get("/v1/jobs/99999999999999999999999"), 400, "id"},
      {"job 0", get("/v1/jobs/0"), 404, "job"},
      {"no such endpoint", get("/v1/secrets"), 404, "path"},
      {"logs: a job id above 2^64", get("/v1/jobs/99999999999999999999999/logs"), 400, "id"},
      {"logs: task 2^32",
       [](const World& w) { return Req(kAlice, "GET", w.Job(w.run_b) + "/logs?task=4294967296"); },
       400, "task"},
      {"logs: a task the job does not have",
       [](const World& w) { return Req(kAlice, "GET", w.Job(w.run_b) + "/logs?task=1"); }, 400,
       "task"},
      {"logs: tail_bytes negative",
       [](const World& w) { return Req(kAlice, "GET", w.Job(w.run_b) + "/logs?tail_bytes=-1"); },
       400, "tail_bytes"},
      {"cancel a job id above 2^64",
       [](const World&) { return Req(kAdmin, "DELETE", "/v1/jobs/18446744073709551616"); }, 400,
       "id"},
      {"a quota of a queue with NUL",
       [](const World&) {
         return Req(kAdmin, "PUT", "/v1/queues/main%00/quota", R"({"G": {"nominal_milli": 1}})");
       },
       404, "queue"},
      {"a quota of a GPU model no node has",
       [](const World&) {
         return Req(kAdmin, "PUT", "/v1/queues/main/quota", R"({"H100": {"nominal_milli": 1}})");
       },
       400, "quota"},
      {"cordon a node not configured",
       [](const World&) { return Req(kAdmin, "POST", "/v1/nodes/n-9/cordon", "{}"); }, 404, "node"},
      {"cordon with an unknown field",
       [](const World&) {
         return Req(kAdmin, "POST", "/v1/nodes/n-2/cordon", R"({"reason": "x", "until": 5})");
       },
       400, "until"},
      {"cordon with a number for a reason",
       [](const World&) { return Req(kAdmin, "POST", "/v1/nodes/n-2/cordon", R"({"reason": 5})"); },
       400, "reason"},
  });
}

// Watchers (long polls, event streams) are bounded per token and in all; while they are all taken,
// health checks, submissions and agents' syncs answer at once; a client that goes away gives its
// watcher back within seconds.
TEST(HostileWatchers, FloodsAreBoundedAndSlotsComeBack) {
  World* w = Shared();
  ASSERT_TRUE(w && w->error.empty()) << (w ? w->error : "no world");
  const std::uint64_t cursor =
      w->Api(kAdmin, "GET", "/v1/events?cursor=0&limit=10000").json["cursor"].get<std::uint64_t>();
  const auto open = [&](const char* token) {
    return std::make_unique<RawConnection>(w->port(), LongPoll(token, cursor));
  };
  constexpr auto kAnswer = std::chrono::seconds(10);
  // Four of alice's at once; a fifth, a long poll or a stream, is refused.
  std::vector<std::unique_ptr<RawConnection>> polls;
  for (int i = 0; i < 4; ++i) polls.push_back(open(kAlice));
  for (auto& p : polls) ASSERT_EQ(p->Status(kAnswer), 200);
  {
    Answer fifth =
        Send(w->port(), Req(kAlice, "GET", fmt::format("/v1/events?wait=30&cursor={}", cursor)));
    EXPECT_EQ(fifth.status, 429) << fifth.text;
    EXPECT_EQ(fifth.json["error"].value("field", ""), "wait") << fifth.text;
    RawConnection stream(w->port(), LongPoll(kAlice, cursor, "/v1/events/stream?cursor="));
    EXPECT_EQ(stream.Status(kAnswer), 429);
  }
  // Four each of three more tokens: every watcher of the server (server.max_watchers).
  for (const char* token : {kAdmin, kBob, kCarol}) {
    for (int i = 0; i < 4; ++i) polls.push_back(open(token));
  }
  for (auto& p : polls) ASSERT_EQ(p->Status(kAnswer), 200);
  Answer more =
      Send(w->port(), Req(kJoin, "GET", fmt::format("/v1/events?wait=30&cursor={}", cursor)));
  EXPECT_EQ(more.status, 429) << more.text;
  EXPECT_EQ(more.json["error"].value("field", ""), "wait") << more.text;
  // The rest of the server answers promptly meanwhile (timeouts of a few seconds: a request queued
  // behind a watcher would wait its 30 s).
  constexpr auto kPrompt = std::chrono::seconds(5);
  const Answer health = Send(w->port(), Req("", "GET", "/healthz"), kPrompt);
  const Answer ready = Send(w->port(), Req("", "GET", "/readyz"), kPrompt);
  const Answer list = Send(w->port(), Req(kBob, "GET", "/v1/jobs"), kPrompt);
  const Answer sync =
      Send(w->port(),
           Req(w->Cred(w->a), "POST", SyncPath(*w, w->a) + "?wait_ms=0", R"({"revision": ""})"),
           kPrompt);
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(ready.status, 200);
  EXPECT_EQ(list.status, 200);
  EXPECT_EQ(sync.status, 200) << sync.text;
  // The agents' own syncs go on: both nodes stay ready.
  const Json nodes = w->Api(kAdmin, "GET", "/v1/nodes").json;  // kept: the loop reads into it
  for (const Json& node : nodes["nodes"]) {
    if (node["name"] != "n-2") {
      EXPECT_EQ(node["agent"]["state"], "ready") << node.dump();
    }
  }
  // A submission answers too (and its event ends every long poll). It stays pending: no node with
  // an agent has room.
  const Answer submitted =
      Send(w->port(),
           Req(kAdmin, "POST", "/v1/jobs",
               R"({"name": "during-flood", "queue": "other", "priority_class": "P2",
                   "command": "true", "groups": [{"gpu_milli": 1000}]})"),
           kPrompt);
  ASSERT_EQ(submitted.status, 201) << submitted.text;
  std::cout << fmt::format(
      "[ info     ] with 16 watchers open: healthz {:.3f} s, readyz {:.3f} s, list {:.3f} s, "
      "sync {:.3f} s, submit {:.3f} s\n",
      health.seconds, ready.seconds, list.seconds, sync.seconds, submitted.seconds);
  polls.clear();
  EXPECT_EQ(w->Api(kAdmin, "DELETE", w->Job(submitted.json["id"].get<std::uint64_t>())).status,
            200);
  const std::uint64_t last =
      w->Api(kAdmin, "GET", "/v1/events?cursor=0&limit=10000").json["cursor"].get<std::uint64_t>();
  // Alice takes her four again (as the answered polls' watchers are given back), and her clients
  // go away without a word: their watchers come back within seconds.
  for (int i = 0; i < 4; ++i) {
    std::unique_ptr<RawConnection> p;
    ASSERT_TRUE(WaitFor(
        [&] {
          p = std::make_unique<RawConnection>(w->port(), LongPoll(kAlice, last));
          return p->Status(kAnswer) == 200;
        },
        std::chrono::seconds(15)));
    polls.push_back(std::move(p));
  }
  EXPECT_EQ(
      Send(w->port(), Req(kAlice, "GET", fmt::format("/v1/events?wait=30&cursor={}", last))).status,
      429);
  polls.clear();  // closed
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<RawConnection> again;
  ASSERT_TRUE(WaitFor(
      [&] {
        again = std::make_unique<RawConnection>(w->port(), LongPoll(kAlice, last));
        return again->Status(kAnswer) == 200;
      },
      std::chrono::seconds(10)))
      << "the watchers of clients that went away were not given back";
  std::cout << fmt::format(
      "[ info     ] a dropped client's watcher came back in {:.1f} s\n",
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

// Connections hold no thread: a thousand idle connections to each of two servers, and 300
// watchers (event streams and long polls) of one, where the thread-per-connection server had 64
// threads in all, leave health checks, submissions and agents' syncs answering at once.
TEST(HostileConnections, IdleConnectionsAndWatchersHoldNoThread) {
  World* w = Shared();
  ASSERT_TRUE(w && w->error.empty()) << (w ? w->error : "no world");
  if (net::RaiseFileLimit() < 3000) GTEST_SKIP() << "the open-file limit is below 3000";
  // The shared world's server allows 16 watchers: a server of its own with room for 300.
  TempDir dir;
  std::string yaml = ClusterYaml();
  const std::string limits = "max_watchers: 16\n  max_watchers_per_token: 4";
  ASSERT_NE(yaml.find(limits), std::string::npos);
  yaml.replace(yaml.find(limits), limits.size(),
               "max_watchers: 1000\n  max_watchers_per_token: 1000");
  ServerProcess own(dir.Write("cluster.yaml", yaml), (dir.path() / "data").string());
  ASSERT_TRUE(own.ready());
  std::vector<std::unique_ptr<RawConnection>> idle, watchers;
  for (int i = 0; i < 1000; ++i) {
    idle.push_back(std::make_unique<RawConnection>(w->port(), ""));
    idle.push_back(std::make_unique<RawConnection>(own.port(), ""));
  }
  for (int i = 0; i < 300; ++i) {
    watchers.push_back(std::make_unique<RawConnection>(
        own.port(),
        LongPoll(kAlice, 0,
                 i % 3 == 0 ? "/v1/events?wait=60&cursor=" : "/v1/events/stream?cursor=")));
  }
  for (auto& c : watchers) ASSERT_EQ(c->Status(std::chrono::seconds(10)), 200);
  constexpr auto kPrompt = std::chrono::seconds(5);
  for (int port : {w->port(), own.port()}) {
    const Answer health = Send(port, Req("", "GET", "/healthz"), kPrompt);
    EXPECT_EQ(health.status, 200);
    EXPECT_LT(health.seconds, 1.0);
  }
  const Answer metrics = Send(own.port(), Req(kAdmin, "GET", "/metrics"), kPrompt);
  EXPECT_NE(metrics.text.find("arbiter_watchers 300"), std::string::npos) << metrics.text;
  // (Its event answers the long polls.)
  const Answer submitted =
      Send(own.port(),
           Req(kAlice, "POST", "/v1/jobs",
               R"({"name": "amid-watchers", "queue": "main", "priority_class": "P2",
                   "groups": [{"gpu_milli": 1000}]})"),
           kPrompt);
  EXPECT_EQ(submitted.status, 201) << submitted.text;
  const Answer sync =
      Send(w->port(),
           Req(w->Cred(w->a), "POST", SyncPath(*w, w->a) + "?wait_ms=0", R"({"revision": ""})"),
           kPrompt);
  EXPECT_EQ(sync.status, 200) << sync.text;
  EXPECT_TRUE(sync.json.value("full", false)) << sync.text;  // a fresh revision: everything
  std::cout << fmt::format(
      "[ info     ] 2,000 idle connections and 300 watchers open: healthz {:.3f} s, submit {:.3f} "
      "s, sync {:.3f} s\n",
      Send(own.port(), Req("", "GET", "/healthz")).seconds, submitted.seconds, sync.seconds);
}

// An agent's sync answers what changed for its node since the revision it gives: everything for
// a revision it does not know, nothing when nothing changed, a removed key when its task was
// taken off; a waiting sync is woken by its own node's change and not by another node's.
TEST(HostileSync, SyncAnswersOnlyWhatChangedAndWakesOnlyItsNode) {
  TempDir dir;
  std::string yaml = ClusterYaml();
  const std::string wait = "agent_sync_wait: 200ms";
  ASSERT_NE(yaml.find(wait), std::string::npos);
  yaml.replace(yaml.find(wait), wait.size(), "agent_sync_wait: 10s");
  ServerProcess server(dir.Write("cluster.yaml", yaml), (dir.path() / "data").string(),
                       std::vector<std::string>{});
  ASSERT_TRUE(server.ready());
  const int port = server.port();
  std::string credential[2];
  for (int i = 0; i < 2; ++i) {
    const Answer joined =
        Send(port, Req(kJoin, "POST", RegisterPath("n-" + std::to_string(i)), Register()));
    ASSERT_EQ(joined.status, 200) << joined.text;
    credential[i] = joined.json["credential"].get<std::string>();
  }
  const auto sync = [&](int node, const std::string& revision, int wait_ms) {
    return Send(port, Req(credential[node], "POST",
                          fmt::format("/v1/nodes/n-{}/sync?wait_ms={}", node, wait_ms),
                          fmt::format(R"({{"revision": "{}"}})", revision)));
  };
  // A job that fits on one node only: on n-0 or n-1, whichever the engine picks.
  const Answer job = Send(port, Req(kAlice, "POST", "/v1/jobs",
                                    R"({"name": "diff", "queue": "main", "priority_class": "P2",
                                        "command": "sleep 100", "groups": [{"gpu_milli": 2000}]})"));
  ASSERT_EQ(job.status, 201) << job.text;
  int on = -1;
  std::string key, revision[2];
  ASSERT_TRUE(WaitFor([&] {
    for (int i = 0; i < 2; ++i) {
      const Answer a = sync(i, "", 0);
      if (a.status != 200 || !a.json.value("full", false)) return false;
      revision[i] = a.json["revision"].get<std::string>();
      if (!a.json["tasks"].empty()) {
        on = i;
        key = a.json["tasks"][0]["key"].get<std::string>();
      }
    }
    return on >= 0;
  }));
  const int other = 1 - on;
  // Nothing changed since: an empty difference, not the whole set again.
  const Answer same = sync(on, revision[on], 0);
  ASSERT_EQ(same.status, 200) << same.text;
  EXPECT_FALSE(same.json.value("full", true)) << same.text;
  EXPECT_TRUE(same.json["tasks"].empty()) << same.text;
  EXPECT_TRUE(same.json["removed"].empty()) << same.text;
  // A revision of another server's run (or made up): everything.
  const Answer foreign = sync(on, "deadbeef.1", 0);
  EXPECT_TRUE(foreign.json.value("full", false)) << foreign.text;
  EXPECT_EQ(foreign.json["tasks"].size(), 1u) << foreign.text;
  // Both nodes wait; the job is cancelled: its node's sync answers at once with the key removed,
  // the other node's waits its wait out.
  Answer mine, theirs;
  std::thread wait_mine(
      [&] { mine = sync(on, foreign.json["revision"].get<std::string>(), 8000); });
  std::thread wait_theirs([&] { theirs = sync(other, revision[other], 3000); });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const auto cancelled_at = std::chrono::steady_clock::now();
  ASSERT_EQ(Send(port, Req(kAlice, "DELETE", "/v1/jobs/" + job.json["id"].dump())).status, 200);
  wait_mine.join();
  const double woken_after =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - cancelled_at).count();
  wait_theirs.join();
  ASSERT_EQ(mine.status, 200) << mine.text;
  EXPECT_LT(woken_after, 2.0);
  EXPECT_EQ(mine.json["removed"], Json::array({key})) << mine.text;
  EXPECT_TRUE(mine.json["tasks"].empty()) << mine.text;
  ASSERT_EQ(theirs.status, 200) << theirs.text;
  EXPECT_GE(theirs.seconds, 2.5) << "woken by another node's change";
  EXPECT_TRUE(theirs.json["tasks"].empty() && theirs.json["removed"].empty()) << theirs.text;
}

// A second server on the port of the first exits at once saying so; the first keeps serving.
TEST(HostilePort, ASecondServerOnTheSamePortExitsWithAClearError) {
  World* w = Shared();
  ASSERT_TRUE(w && w->error.empty()) << (w ? w->error : "no world");
  const Json before = Snapshot(*w);
  for (const std::string& listen : {w->address(), "0.0.0.0:" + std::to_string(w->port()),
                                    "localhost:" + std::to_string(w->port())}) {
    const std::string data = (w->dir.path() / ("second-" + std::to_string(listen.size()))).string();
    const std::string command = fmt::format(
        "timeout 30 {} server --config {} --data {} --listen {} --dev --insecure-http "
        "2>&1",
        ARBITER_BINARY, w->config, data, listen);
    FILE* pipe = ::popen(command.c_str(), "r");
    ASSERT_NE(pipe, nullptr);
    std::string output;
    char buffer[4096];
    std::size_t n;
    while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) output.append(buffer, n);
    const int status = ::pclose(pipe);
    ASSERT_TRUE(WIFEXITED(status)) << output;
    EXPECT_NE(WEXITSTATUS(status), 0) << listen << ": " << output;
    EXPECT_NE(WEXITSTATUS(status), 124) << listen << ": it ran (timeout): " << output;
    EXPECT_NE(output.find("--listen"), std::string::npos) << output;
    EXPECT_NE(output.find("in use"), std::string::npos) << output;
    EXPECT_EQ(output.find("listening on"), std::string::npos) << output;
  }
  EXPECT_EQ(Send(w->port(), Req("", "GET", "/healthz")).status, 200);
  EXPECT_EQ(Send(w->port(), Req("", "GET", "/readyz")).status, 200);
  EXPECT_EQ(Snapshot(*w), before);
}

// `arbiter logs` reads a task's log through the server; the agent's log server answers only the
// node's log token (not a join token, a credential, a user's token or another node's log token);
// ids beyond any integer are 400, and it keeps serving.
TEST(HostileLogs, TheLogServerTakesOnlyItsLogTokenAndBadIds) {
  World* w = Shared();
  ASSERT_TRUE(w && w->error.empty()) << (w ? w->error : "no world");
  const CommandResult logs = RunCli(w->address(), kAlice, fmt::format("logs {}", w->run_b));
  EXPECT_EQ(logs.status, 0) << logs.output;
  EXPECT_NE(logs.output.find("hostile-task-up"), std::string::npos) << logs.output;
  const int port = w->log_port[w->b];
  ASSERT_GT(port, 0);
  const std::string path = fmt::format("/logs/{}/0", w->run_b);
  struct Direct {
    std::string name;
    std::optional<std::string> authorization;
    std::string path;
    int status;
  };
  const std::vector<Direct> requests = {
      {"no token", std::nullopt, path, 401},
      {"the agent's join token", Bearer(kJoin), path, 401},
      {"the node's credential", Bearer(w->Cred(w->b)), path, 401},
      {"an admin token", Bearer(kAdmin), path, 401},
      {"the submitter's token", Bearer(kBob), path, 401},
      {"the other node's log token", Bearer(w->LogToken(w->a)), path, 401},
      {"the log token cut short", Bearer(w->LogToken(w->b).substr(1)), path, 401},
      {"no token, a job id above 2^64", std::nullopt, "/logs/99999999999999999999999/0", 401},
      {"the log token", Bearer(w->LogToken(w->b)), path, 200},
      {"the log token, a job id above 2^64", Bearer(w->LogToken(w->b)),
       "/logs/99999999999999999999999/0", 400},
      {"the log token, a rank above 2^32", Bearer(w->LogToken(w->b)),
       fmt::format("/logs/{}/4294967296", w->run_b), 400},
      {"the log token, a job with no log here", Bearer(w->LogToken(w->b)), "/logs/424242/0", 404},
      {"the log token, tail_bytes above 2^64", Bearer(w->LogToken(w->b)),
       path + "?tail_bytes=99999999999999999999999", 200},
  };
  for (const Direct& d : requests) {
    httplib::Client client("127.0.0.1", port);
    client.set_read_timeout(std::chrono::seconds(30));
    httplib::Headers headers;
    if (d.authorization) headers.emplace("Authorization", *d.authorization);
    auto res = client.Get(d.path, headers);
    ASSERT_TRUE(res) << d.name << ": no answer (did the log server die?)";
    EXPECT_EQ(res->status, d.status) << d.name << ": " << res->body;
    if (d.status == 200) {
      EXPECT_NE(res->body.find("hostile-task-up"), std::string::npos) << d.name;
    } else {
      EXPECT_EQ(res->body.find("hostile-task-up"), std::string::npos) << d.name;
    }
  }
  // Still serving, through the server too.
  const CommandResult again = RunCli(w->address(), kAdmin, fmt::format("logs {}", w->run_b));
  EXPECT_EQ(again.status, 0) << again.output;
  EXPECT_NE(again.output.find("hostile-task-up"), std::string::npos) << again.output;
  // Nothing the CLI prints from the server carries a control character.
  for (const char* command : {"jobs", "nodes", "queues"}) {
    const CommandResult r = RunCli(w->address(), kAdmin, command);
    EXPECT_EQ(r.status, 0) << r.output;
    for (char c : r.output) {
      EXPECT_FALSE(static_cast<unsigned char>(c) < 0x20 && c != '\n')
          << command << ": " << r.output;
    }
  }
}

// ---- Defects this suite found, fixed: each case stays ----

TEST(HostileFoundDefects, ANodeStateReasonWithControlCharactersIsRefused) {
  // Found by this suite, fixed since; kept as its regression test.
  const auto cordon = [](std::string reason_json) {
    return [reason_json](const World&) {
      return Req(kAdmin, "POST", "/v1/nodes/n-2/cordon", "{\"reason\": " + reason_json + "}");
    };
  };
  RunCases({
      {"a reason with ESC", cordon(R"("disk\u001b[2J")"), 400, "reason"},
      {"a reason with U+202E", cordon(R"("ok\u202efail")"), 400, "reason"},
      {"a reason with NUL", cordon(R"("a\u0000b")"), 400, "reason"},
      {"a reason with U+009B", cordon(R"("a\u009b31m")"), 400, "reason"},
      // Characters that show as nothing without being format characters (default-ignorable).
      {"a reason with U+3164 (Hangul filler)", cordon(R"("ok\u3164")"), 400, "reason"},
      {"a reason with U+FE0F (variation selector)", cordon(R"("a\ufe0fb")"), 400, "reason"},
      {"a drain reason with a newline",
       [](const World&) {
         return Req(kAdmin, "POST", "/v1/nodes/n-2/drain", R"({"reason": "a\nforged line"})");
       },
       400, "reason"},
  });
}

TEST(HostileFoundDefects, QuotasThatOverflowAreRefused) {
  // Found by this suite, fixed since; kept as its regression test.
  RunCases({
      {"a borrowing limit of 2^63-1",
       [](const World&) {
         return Req(
             kAdmin, "PUT", "/v1/queues/other/quota",
             R"({"G": {"nominal_milli": 1000, "borrowing_limit_milli": 9223372036854775807}})");
       },
       400, "quota.G.borrowing_limit_milli"},
      {"a nominal quota of 2^63-1",
       [](const World&) {
         return Req(kAdmin, "PUT", "/v1/queues/main/quota",
                    R"({"G": {"nominal_milli": 9223372036854775807}})");
       },
       400, "quota.G.nominal_milli"},
  });
}

TEST(HostileFoundDefects, LongSyncsFromOneNodeDoNotStallTheServer) {
  // Found by this suite, fixed since; kept as its regression test.
  World* w = Shared();
  ASSERT_TRUE(w && w->error.empty()) << (w ? w->error : "no world");
  const Answer now = Send(w->port(), Req(w->Cred(w->a), "POST", SyncPath(*w, w->a) + "?wait_ms=0",
                                         R"({"revision": ""})"));
  ASSERT_EQ(now.status, 200) << now.text;
  const std::string body =
      fmt::format(R"({{"revision": "{}"}})", now.json["revision"].get<std::string>());
  // 10 s waits, not 60: the server of the other tests is itself again soon after.
  std::vector<std::unique_ptr<RawConnection>> syncs;
  for (int i = 0; i < 70; ++i) {
    syncs.push_back(std::make_unique<RawConnection>(
        w->port(), fmt::format("POST {}?wait_ms=10000 HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                               "Authorization: Bearer {}\r\nContent-Type: application/json\r\n"
                               "Content-Length: {}\r\n\r\n{}",
                               SyncPath(*w, w->a), w->Cred(w->a), body.size(), body)));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const Answer health = Send(w->port(), Req("", "GET", "/healthz"), std::chrono::seconds(5));
  const Answer submit =
      Send(w->port(),
           Req(kAdmin, "POST", "/v1/jobs",
               R"({"name": "during-syncs", "queue": "other", "priority_class": "P2",
                   "command": "true", "groups": [{"gpu_milli": 1000}]})"),
           std::chrono::seconds(5));
  syncs.clear();
  EXPECT_EQ(health.status, 200) << "no answer to /healthz within 5 s";
  EXPECT_EQ(submit.status, 201) << "no answer to a submission within 5 s";
  if (submit.status == 201) {
    EXPECT_EQ(w->Api(kAdmin, "DELETE", w->Job(submit.json["id"].get<std::uint64_t>())).status, 200);
  }
  // The server is itself again once the waits have ended.
  EXPECT_TRUE(WaitFor([&] { return Send(w->port(), Req("", "GET", "/healthz")).status == 200; }));
}

}  // namespace
}  // namespace arbiter::testing
