// High availability against a real PostgreSQL (docs/design/ha.md): servers sharing one store,
// exactly one leading; kill -9 of the leader loses no acknowledged submission; a leader cut off
// from the database stops and another takes over; agents follow the leader and run every task
// once.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "agent/agent_process.h"
#include "server/server_process.h"
#include "testing/fault_proxy.h"
#include "testing/postgres.h"
#include "testing/sanitized.h"

namespace arbiter::testing {
namespace {

constexpr const char* kAdmin = "admin-token-0001";
constexpr const char* kAlice = "alice-token-0001";
constexpr const char* kAgent = "agent-token-0001";

// Four nodes of four GPUs (virtual, or run by agents, which find at least 1 CPU and 256 MiB).
std::string ClusterYaml() {
  return R"(
priority_classes:
  - {name: normal, value: 10}
queues:
  - {name: main}
nodes:
  - name: g-{i}
    count: 4
    gpus: {model: G, count: 4, memory: 40Gi}
    cpu: 1
    memory: 256Mi
server:
  tokens:
    - {name: admin, token: admin-token-0001, role: admin}
    - {name: alice, token: alice-token-0001, role: user, queues: [main], priority_classes: [normal]}
    - {name: agent, token: agent-token-0001, role: agent}
  cycle_min_interval: 20ms
  cycle_period: 200ms
  max_active_jobs_per_user: 100000
  agent_sync_wait: 2s
  node_lost_timeout: 30s
)";
}

std::string Job(const std::string& key, int runtime_ms, const std::string& command = "") {
  Json j = {{"name", "job"},
            {"queue", "main"},
            {"priority_class", "normal"},
            {"runtime_estimate_ms", runtime_ms},
            {"idempotency_key", key},
            {"groups", Json::array({{{"tasks", 1}, {"gpu_milli", 1000}}})}};
  if (!command.empty()) j["command"] = command;
  return j.dump();
}

// A client of several servers, as the CLI and agents are: a standby's 307 is followed, a dead
// server or a 503 moves on to the next, until `deadline`.
class LeaderClient {
 public:
  explicit LeaderClient(std::vector<int>* ports, std::mutex* mu) : ports_(ports), mu_(mu) {}

  Reply Call(const std::string& method, const std::string& path, const std::string& body = "",
             std::chrono::seconds deadline = std::chrono::seconds(60)) {
    const auto end = std::chrono::steady_clock::now() + deadline;
    std::size_t next = 0;
    while (std::chrono::steady_clock::now() < end) {
      int port;
      {
        std::lock_guard lock(*mu_);
        if (ports_->empty()) return {};
        port = (*ports_)[next++ % ports_->size()];
      }
      for (int hop = 0; hop < 3 && port > 0; ++hop) {
        httplib::Client client("127.0.0.1", port);
        client.set_connection_timeout(std::chrono::seconds(2));
        client.set_read_timeout(std::chrono::seconds(10));
        httplib::Headers headers{{"Authorization", fmt::format("Bearer {}", kAlice)}};
        httplib::Result res = method == "GET"
                                  ? client.Get(path, headers)
                                  : client.Post(path, headers, body, "application/json");
        if (!res) break;
        if (res->status == 307) {
          const std::string location = res->get_header_value("Location");
          const auto colon = location.rfind(':', location.find('/', 8));
          port = std::atoi(location.c_str() + colon + 1);
          continue;
        }
        if (res->status == 503) break;
        return {res->status, Json::parse(res->body, nullptr, false)};
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return {};
  }

 private:
  std::vector<int>* ports_;
  std::mutex* mu_;
};

class HaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    pg_ = PostgresInstance::Shared(&error);
    ASSERT_NE(pg_, nullptr) << error;
    url_ = pg_->NewDatabase();
    config_ = dir_.Write("cluster.yaml", ClusterYaml());
  }

  // A server on the shared store (standing by until it leads), through `url` when given.
  std::unique_ptr<ServerProcess> Start(std::vector<std::string> extra = {"--virtual-nodes"},
                                       const std::string& url = "",
                                       const std::string& lease = "2s") {
    extra.insert(extra.end(), {"--store", url.empty() ? url_ : url, "--lease", lease});
    auto s = std::make_unique<ServerProcess>(
        config_, (dir_.path() / ("data-" + std::to_string(++servers_))).string(), extra,
        "127.0.0.1:0", /*wait_ready=*/false);
    EXPECT_GT(s->port(), 0);
    return s;
  }

  static Reply Ready(int port) { return Call(port, "", "GET", "/readyz"); }

  // The index of the one server that answers /readyz, once exactly one does (-1 otherwise).
  static int WaitForOneLeader(const std::vector<std::unique_ptr<ServerProcess>>& servers) {
    int leader = -1;
    WaitFor([&] {
      int ready = 0;
      for (std::size_t i = 0; i < servers.size(); ++i) {
        if (servers[i] && Ready(servers[i]->port()).status == 200) {
          ++ready;
          leader = static_cast<int>(i);
        }
      }
      return ready == 1;
    });
    return leader;
  }

  // The database's name, and a statement's first value in it.
  std::string Db() const {
    return url_.substr(url_.rfind('/') + 1, url_.find('?') - url_.rfind('/') - 1);
  }
  std::string Sql(const std::string& sql) const { return pg_->Sql(Db(), sql); }
  std::uint64_t Epoch() const { return std::stoull(Sql("SELECT epoch FROM leader")); }
  // A proxy in front of the database, and the store's URL through it.
  std::unique_ptr<FaultProxy> Proxy(int port = 0) const {
    return std::make_unique<FaultProxy>(
        pg_->socket_dir() + "/.s.PGSQL." + std::to_string(pg_->port()), port);
  }
  std::string UrlThrough(int proxy_port) const {
    return fmt::format("postgresql://arbiter@127.0.0.1:{}/{}?sslmode=disable", proxy_port, Db());
  }

  PostgresInstance* pg_ = nullptr;
  TempDir dir_;
  std::string url_;
  std::string config_;
  int servers_ = 0;
};

TEST_F(HaTest, ServersStartedTogetherElectExactlyOneAndStandbysSendToIt) {
  std::vector<std::unique_ptr<ServerProcess>> servers;
  for (int i = 0; i < 3; ++i) servers.push_back(Start());
  const int leader = WaitForOneLeader(servers);
  ASSERT_GE(leader, 0);
  const std::string leader_url =
      "http://127.0.0.1:" + std::to_string(servers[static_cast<std::size_t>(leader)]->port());
  // It stays one: the others stand by, naming it.
  std::this_thread::sleep_for(std::chrono::seconds(1));
  for (std::size_t i = 0; i < servers.size(); ++i) {
    const Reply ready = Ready(servers[i]->port());
    if (static_cast<int>(i) == leader) {
      EXPECT_EQ(ready.status, 200);
      continue;
    }
    EXPECT_EQ(ready.status, 503);
    EXPECT_EQ(ready.body.value("leader", ""), leader_url) << ready.body.dump();
    EXPECT_EQ(Call(servers[i]->port(), "", "GET", "/healthz").status, 200);
    httplib::Client client("127.0.0.1", servers[i]->port());
    httplib::Result res =
        client.Get("/v1/jobs?state=pending", {{"Authorization", fmt::format("Bearer {}", kAlice)}});
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 307);
    EXPECT_EQ(res->get_header_value("Location"), leader_url + "/v1/jobs?state=pending");
    // The snapshot too: a standby has no state of its own to write.
    res = client.Get("/v1/admin/snapshot", {{"Authorization", std::string("Bearer ") + kAdmin}});
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 307);
    EXPECT_EQ(res->get_header_value("Location"), leader_url + "/v1/admin/snapshot");
  }
  // Work submitted through a standby runs on the leader.
  std::vector<int> ports;
  for (auto& s : servers) ports.push_back(s->port());
  std::mutex mu;
  LeaderClient client(&ports, &mu);
  const Reply submitted = client.Call("POST", "/v1/jobs", Job("one", 200));
  ASSERT_EQ(submitted.status, 201) << submitted.body.dump();
  const std::uint64_t id = submitted.body["id"].get<std::uint64_t>();
  EXPECT_TRUE(WaitFor([&] {
    const Reply job = client.Call("GET", "/v1/jobs/" + std::to_string(id));
    return job.status == 200 && job.body["status"].value("state", "") == "completed";
  }));
}

TEST_F(HaTest, KillingTheLeaderUnderLoadLosesNothingAndStartsNoTaskTwice) {
  // Two servers; a killed one comes back on its port (as a supervisor restarts it), which the
  // agents and clients know.
  std::vector<std::unique_ptr<ServerProcess>> servers;
  servers.push_back(Start({}));
  servers.push_back(Start({}));
  std::vector<int> ports = {servers[0]->port(), servers[1]->port()};
  std::mutex mu;
  ASSERT_GE(WaitForOneLeader(servers), 0);
  const std::string addresses = "http://127.0.0.1:" + std::to_string(ports[0]) +
                                ",http://127.0.0.1:" + std::to_string(ports[1]);
  std::vector<std::unique_ptr<AgentProcess>> agents;
  for (int i = 0; i < 4; ++i) {
    agents.push_back(
        std::make_unique<AgentProcess>(addresses, kAgent, "g-" + std::to_string(i), "4xG-40G",
                                       (dir_.path() / ("agent-" + std::to_string(i))).string()));
  }
  LeaderClient client(&ports, &mu);
  auto ready_agents = [&] {
    const Reply nodes = client.Call("GET", "/v1/nodes");
    int n = 0;
    for (const Json& node : nodes.body.value("nodes", Json::array())) {
      if (node["agent"].is_object() && node["agent"]["state"] == "ready") ++n;
    }
    return n;
  };
  ASSERT_TRUE(WaitFor([&] { return ready_agents() == 4; }));

  // Real tasks: each run writes its job id to one file, so a task started twice shows.
  const std::string marks = (dir_.path() / "marks").string();
  auto job = [&](const std::string& key) {
    Json j = Json::parse(Job(key, 0));
    j.erase("runtime_estimate_ms");
    j["argv"] = Json::array({"/bin/sh", "-c", "echo $ARBITER_JOB_ID >> " + marks + "; sleep 0.1"});
    return j.dump();
  };
  // 20 clients submit without pause, 100 acknowledged jobs for each kill: kill k comes once
  // 100 k + 50 are acknowledged, so the rest of its 100 are in flight across it however fast the
  // servers and the clients are (a fixed count for the whole test could all be acknowledged
  // before the last kill). Each submission has its own idempotency key and is retried (following
  // the leader) until some server acknowledges it; one that is not gives its place back.
  std::map<std::string, std::uint64_t> acknowledged;  // key -> id
  std::map<int, int> refused;                         // status (0: no answer) -> submissions
  std::size_t allowed = 100, issued = 0;              // acknowledged or in flight, under mu
  std::atomic<bool> stop{false};
  std::vector<std::thread> clients;
  // Stopped and joined however the test ends (a failed assertion returns early).
  struct Join {
    std::atomic<bool>& stop;
    std::vector<std::thread>& threads;
    ~Join() {
      stop = true;
      for (std::thread& t : threads) {
        if (t.joinable()) t.join();
      }
    }
  } join{stop, clients};
  for (int c = 0; c < 20; ++c) {
    clients.emplace_back([&, c] {
      LeaderClient mine(&ports, &mu);
      for (int n = 0; !stop;) {
        {
          std::unique_lock lock(mu);
          if (issued >= allowed) {
            lock.unlock();
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
            continue;
          }
          ++issued;
        }
        const std::string key = "c" + std::to_string(c) + "-" + std::to_string(n++);
        const Reply r = mine.Call("POST", "/v1/jobs", job(key));
        std::lock_guard lock(mu);
        if (r.status != 201 && r.status != 200) {  // not acknowledged: may or may not be
          ++refused[r.status];
          --issued;
          continue;
        }
        acknowledged[key] = r.body["id"].get<std::uint64_t>();
      }
    });
  }
  auto count = [&] {
    std::lock_guard lock(mu);
    return acknowledged.size();
  };
  for (std::size_t kill = 0; kill < 3; ++kill) {
    {
      std::lock_guard lock(mu);
      allowed = 100 * (kill + 1);
    }
    ASSERT_TRUE(WaitFor([&] { return count() >= 100 * kill + 50; }, std::chrono::seconds(120)))
        << "submissions stalled before kill " << kill << ": " << count()
        << " acknowledged; not acknowledged (status: "
        << "submissions): " << [&] {
             std::lock_guard lock(mu);
             return ::testing::PrintToString(refused);
           }();
    const int leader = WaitForOneLeader(servers);
    ASSERT_GE(leader, 0);
    const auto l = static_cast<std::size_t>(leader);
    EXPECT_EQ(servers[l]->Stop(SIGKILL), -1);
    servers[l] = std::make_unique<ServerProcess>(
        config_, (dir_.path() / ("data-again-" + std::to_string(kill))).string(),
        std::vector<std::string>{"--store", url_, "--lease", "2s"},
        "127.0.0.1:" + std::to_string(ports[l]), /*wait_ready=*/false);
    ASSERT_GE(WaitForOneLeader(servers), 0) << "no server took over after kill " << kill;
  }
  stop = true;
  for (std::thread& t : clients) t.join();
  ASSERT_GE(count(), 150u);

  // Every acknowledged submission is in the store exactly once (under its id, and no other job
  // has its key), every job completes, and every job ran once. Read from the database itself: a
  // server lists only the finished jobs it has seen.
  const std::string db = url_.substr(url_.rfind('/') + 1, url_.find('?') - url_.rfind('/') - 1);
  std::map<std::uint64_t, std::pair<std::string, std::string>> stored;  // id -> key, state
  std::map<std::string, int> keys;
  std::string unfinished;
  const bool done = WaitFor(
      [&] {
        const std::string rows = pg_->Sql(
            db, "SELECT string_agg(id || ' ' || idempotency_key || ' ' || state, ',') FROM jobs");
        stored.clear();
        keys.clear();
        unfinished.clear();
        std::istringstream in(rows);
        std::string row;
        while (std::getline(in, row, ',')) {
          std::istringstream fields(row);
          std::uint64_t id = 0;
          std::string key, state;
          fields >> id >> key >> state;
          stored[id] = {key, state};
          ++keys[key];
          if (state != "completed" && unfinished.size() < 200) {
            unfinished += " " + std::to_string(id) + ":" + state;
          }
        }
        return unfinished.empty();
      },
      std::chrono::seconds(180));
  EXPECT_TRUE(done) << "jobs not completed:" << unfinished;
  for (const auto& [key, id] : acknowledged) {
    ASSERT_TRUE(stored.count(id)) << "acknowledged job " << id << " (" << key << ") is missing";
    EXPECT_EQ(stored[id].first, key) << "job " << id;
    EXPECT_EQ(keys[key], 1) << key;
  }
  std::map<std::uint64_t, int> runs;
  std::ifstream in(marks);
  for (std::uint64_t id; in >> id;) ++runs[id];
  for (const auto& [id, row] : stored) {
    EXPECT_EQ(runs[id], 1) << "job " << id << " ran " << runs[id] << " times";
  }
}

TEST_F(HaTest, ALeaderCutOffFromTheDatabaseStopsAndAnotherLeads) {
  std::vector<std::unique_ptr<ServerProcess>> servers;
  servers.push_back(Start());
  servers.push_back(Start());
  const int leader = WaitForOneLeader(servers);
  ASSERT_GE(leader, 0);
  const auto l = static_cast<std::size_t>(leader);
  // Its sessions end (as when the database or the network drops them; only a leader has a store
  // writer): it must stop.
  EXPECT_EQ(pg_->Terminate("arbiter-store-writer"), 1);
  // Its lease's session is named after its id, "HOST:PID:RANDOM" (store::LeaseSessionName).
  Sql(
      fmt::format("SELECT count(*) FILTER (WHERE pg_terminate_backend(pid, 5000)) FROM "
                  "pg_stat_activity WHERE application_name LIKE 'arbiter-lease-%:{}:%'",
                  servers[l]->pid()));
  EXPECT_EQ(servers[l]->WaitExit(std::chrono::seconds(30)), 3);
  servers[l].reset();
  const int next = WaitForOneLeader(servers);
  ASSERT_EQ(next, static_cast<int>(1 - l));
  const Reply submitted =
      Call(servers[1 - l]->port(), kAlice, "POST", "/v1/jobs", Job("after", 200));
  ASSERT_EQ(submitted.status, 201) << submitted.body.dump();
}

TEST_F(HaTest, AStalledLeaderIsDeposedAfterItsLeaseAndNeverWritesAgain) {
  std::vector<std::unique_ptr<ServerProcess>> servers;
  servers.push_back(Start());
  servers.push_back(Start());
  const int leader = WaitForOneLeader(servers);
  ASSERT_GE(leader, 0);
  const auto l = static_cast<std::size_t>(leader);
  const int other = servers[1 - l]->port();
  const Reply first = Call(servers[l]->port(), kAlice, "POST", "/v1/jobs", Job("first", 60000));
  ASSERT_EQ(first.status, 201) << first.body.dump();
  // The leader stalls (a stopped process, a frozen machine): its database sessions stay open and
  // its lock stays held, but it stops renewing. After the lease (2 s) the other server ends its
  // session and leads.
  ::kill(servers[l]->pid(), SIGSTOP);
  EXPECT_TRUE(WaitFor([&] { return Ready(other).status == 200; }, std::chrono::seconds(30)));
  const Reply second = Call(other, kAlice, "POST", "/v1/jobs", Job("second", 60000));
  ASSERT_EQ(second.status, 201) << second.body.dump();
  // Woken, the old leader finds its lease gone and stops (status 3); a write it tries meanwhile
  // is fenced (the store's own test, PostgresStore fencing, shows that nothing of it is stored).
  ::kill(servers[l]->pid(), SIGCONT);
  EXPECT_EQ(servers[l]->WaitExit(std::chrono::seconds(30)), 3);
  servers[l].reset();
  EXPECT_EQ(Ready(other).status, 200);
  const Reply third = Call(other, kAlice, "POST", "/v1/jobs", Job("third", 60000));
  ASSERT_EQ(third.status, 201) << third.body.dump();
  EXPECT_EQ(Sql("SELECT epoch FROM leader"), "2");
  EXPECT_EQ(Sql("SELECT count(*) FROM jobs"), "3");
}

// A store large enough that recovering it takes longer than the lease (1 s): the leader holds
// its lease from the moment it wins, so the standbys started beside it never depose it, and
// after kill -9 the next one takes over once and completes, however long its recovery.
TEST_F(HaTest, ARecoveryLongerThanTheLeaseCompletesAndIsNotDeposed) {
  {
    std::unique_ptr<ServerProcess> first = Start();
    ASSERT_TRUE(WaitFor([&] { return Ready(first->port()).status == 200; }));
    const Reply one = Call(first->port(), kAlice, "POST", "/v1/jobs", Job("template", 3600000));
    ASSERT_EQ(one.status, 201) << one.body.dump();
    EXPECT_EQ(first->Stop(SIGTERM), 0);
  }
  // 300,000 held jobs (active, so recovered, but not scheduled), copies of the first; 100,000
  // in a sanitized build, whose recovery of them is as long (CI's time).
  constexpr int kJobs = kSanitized ? 100000 : 300000;
  Sql(fmt::format(
      "INSERT INTO jobs (id, name, user_name, queue, priority_class, submit_time, spec, state) "
      "SELECT g, name, user_name, queue, priority_class, submit_time, spec, 'held' "
      "FROM jobs, generate_series(2, {}) g WHERE id = 1",
      kJobs));
  Sql(fmt::format("UPDATE counters SET last_job_id = {}", kJobs));
  const std::uint64_t before = Epoch();
  std::vector<std::unique_ptr<ServerProcess>> servers;
  for (int i = 0; i < 3; ++i) servers.push_back(Start({"--virtual-nodes"}, "", "1s"));
  // Until one is ready: when it won, and the renewals of its row seen while it recovered.
  int leader = -1;
  std::optional<std::chrono::steady_clock::time_point> won;
  std::set<std::string> renewals;
  ASSERT_TRUE(WaitFor(
      [&] {
        leader = -1;
        for (std::size_t i = 0; i < servers.size(); ++i) {
          if (Ready(servers[i]->port()).status == 200) leader = static_cast<int>(i);
        }
        if (leader < 0 && Epoch() == before + 1) {
          if (!won) won = std::chrono::steady_clock::now();
          renewals.insert(Sql("SELECT renewed_at::text FROM leader"));
        }
        return leader >= 0;
      },
      std::chrono::seconds(180)));
  const auto recovery =
      won ? std::chrono::steady_clock::now() - *won : std::chrono::steady_clock::duration::zero();
  std::printf("recovery of %d jobs: about %.2f s; %zu renewals seen during it\n", kJobs,
              std::chrono::duration<double>(recovery).count(), renewals.size());
  // A recovery longer than the lease renewed the row while it ran (every fifth of the lease).
  if (recovery > std::chrono::seconds(1)) {
    EXPECT_GE(renewals.size(), 2u);
  }
  // One election, and it holds.
  std::this_thread::sleep_for(std::chrono::seconds(3));
  EXPECT_EQ(Epoch(), before + 1);
  EXPECT_EQ(WaitForOneLeader(servers), leader);
  const std::size_t l = static_cast<std::size_t>(leader);
  const pid_t killed = servers[l]->pid();
  ::kill(killed, SIGKILL);
  EXPECT_EQ(servers[l]->WaitExit(std::chrono::seconds(10)), -1);  // killed by a signal
  servers[l].reset();
  // The next leader recovers the jobs, answering 503 meanwhile: never a redirect to the
  // server that is gone.
  ASSERT_TRUE(WaitFor([&] { return Epoch() == before + 2; }, std::chrono::seconds(30)));
  const std::string holder = Sql("SELECT holder FROM leader");
  for (auto& s : servers) {
    if (!s || holder.find(fmt::format(":{}:", s->pid())) == std::string::npos) continue;
    httplib::Client client("127.0.0.1", s->port());
    httplib::Result res =
        client.Get("/v1/jobs?limit=1", {{"Authorization", fmt::format("Bearer {}", kAlice)}});
    ASSERT_TRUE(res);
    EXPECT_TRUE(res->status == 503 || res->status == 200) << res->status << " " << res->body;
    if (res->status == 503) {
      EXPECT_EQ(res->get_header_value("Retry-After"), "1");
    }
  }
  int next = -1;
  ASSERT_TRUE(WaitFor(
      [&] {
        for (std::size_t i = 0; i < servers.size(); ++i) {
          if (servers[i] && Ready(servers[i]->port()).status == 200) next = static_cast<int>(i);
        }
        return next >= 0;
      },
      std::chrono::seconds(180)));
  std::this_thread::sleep_for(std::chrono::seconds(3));
  EXPECT_EQ(Epoch(), before + 2) << "the takeover did not hold";
  EXPECT_EQ(Ready(servers[static_cast<std::size_t>(next)]->port()).status, 200);
  // (alice is at her limit of active jobs: the administrator submits.)
  const Reply after = Call(servers[static_cast<std::size_t>(next)]->port(), kAdmin, "POST",
                           "/v1/jobs", Job("after", 3600000));
  EXPECT_EQ(after.status, 201) << after.body.dump();
}

// The leader's path to the database hangs without a TCP error (a proxy that stops forwarding):
// it stops answering as the leader within half a lease of its last renewal, before a standby can
// take over (never two ready at once), answers 503 naming no leader, fails the submission it
// holds over to the client, and exits within about a second.
TEST_F(HaTest, ALeaderWhoseDatabaseHangsStepsDownBeforeAnotherLeads) {
  std::vector<std::unique_ptr<FaultProxy>> proxies;
  std::vector<std::unique_ptr<ServerProcess>> servers;
  for (int i = 0; i < 2; ++i) {
    proxies.push_back(Proxy());
    servers.push_back(Start({"--virtual-nodes"}, UrlThrough(proxies.back()->port())));
  }
  const int leader = WaitForOneLeader(servers);
  ASSERT_GE(leader, 0);
  const auto l = static_cast<std::size_t>(leader);
  const int old_port = servers[l]->port(), other_port = servers[1 - l]->port();
  const Reply first = Call(old_port, kAlice, "POST", "/v1/jobs", Job("first", 3600000));
  ASSERT_EQ(first.status, 201) << first.body.dump();

  proxies[l]->Hang();
  const auto hung = std::chrono::steady_clock::now();
  // A submission to the old leader now is held on the hung path, then failed over: 503.
  std::thread held_submit([&] {
    const Reply held = Call(old_port, kAlice, "POST", "/v1/jobs", Job("held", 3600000));
    EXPECT_TRUE(held.status == 503 || held.status == 0) << held.status << held.body.dump();
  });
  bool both = false, old_ready = true;
  std::chrono::steady_clock::duration stepped_down{};
  WaitFor(
      [&] {
        const bool a = Ready(old_port).status == 200;
        const bool b = Ready(other_port).status == 200;
        if (a && b) both = true;
        if (old_ready && !a) {
          old_ready = false;
          stepped_down = std::chrono::steady_clock::now() - hung;
        }
        return b;
      },
      std::chrono::seconds(60));
  held_submit.join();
  EXPECT_FALSE(both) << "two servers answered as the leader at once";
  EXPECT_FALSE(old_ready);
  // Half a lease (1 s) after its last renewal, so well within the lease; generous for a loaded
  // machine, and far below what TCP alone takes (15 s and more).
  EXPECT_LT(stepped_down, std::chrono::seconds(4));
  EXPECT_EQ(servers[l]->WaitExit(std::chrono::seconds(10)), 3);
  // The new leader takes the submission again, with the same key: one job.
  const Reply again = Call(other_port, kAlice, "POST", "/v1/jobs", Job("held", 3600000));
  EXPECT_EQ(again.status, 201) << again.body.dump();
  proxies[l]->Resume();
  EXPECT_EQ(Sql("SELECT count(*) FROM jobs WHERE idempotency_key = 'held'"), "1");
}

// A server started while the database cannot be reached waits for it (and says so) rather than
// exiting, and leads once it answers.
TEST_F(HaTest, AServerStartedBeforeItsDatabaseWaitsForIt) {
  int port = 0;
  { port = Proxy()->port(); }  // a free port, closed again: nothing answers there yet
  // The database comes back 3 s after the server started. (The server is started by this thread:
  // a server process dies with the thread that started it.)
  std::unique_ptr<FaultProxy> proxy;
  std::thread back([&] {
    std::this_thread::sleep_for(std::chrono::seconds(3));
    proxy = Proxy(port);
  });
  std::unique_ptr<ServerProcess> server = Start({"--virtual-nodes"}, UrlThrough(port));
  back.join();
  ASSERT_GT(server->port(), 0) << "the server exited instead of waiting for the database";
  EXPECT_TRUE(WaitFor([&] { return Ready(server->port()).status == 200; }));
}

}  // namespace
}  // namespace arbiter::testing
