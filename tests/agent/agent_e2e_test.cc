// End to end: a real server and three real agents on loopback, with declared devices, running
// real short processes. Eviction with a checkpoint and a resume, a gang's rendezvous variables,
// a lost node and the fencing of its stale task, restarts of the server and of an agent, failed
// tasks and the retry policy, and an agent whose devices do not match the configuration.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "agent/agent_process.h"

namespace arbiter::testing {
namespace {

constexpr const char* kAdmin = "admin-token-0001";
constexpr const char* kAgentToken = "agent-token-0001";

// Three nodes of two GPUs; `P0` may evict `P1`, which has 5 s to checkpoint and stop.
std::string ClusterYaml(const std::string& checkpoints) {
  return R"(
priority_classes:
  - {name: P0, value: 100, preemptible: false}
  - {name: P1, value: 10, grace_period: 5s}
queues:
  - {name: main}
nodes:
  - name: n-{i}
    count: 3
    gpus: {model: G, count: 2, memory: 40Gi}
    cpu: 1
    memory: 256Mi
server:
  tokens:
    - {name: admin, token: admin-token-0001, role: admin}
    - {name: agent, token: agent-token-0001, role: agent}
  cycle_min_interval: 20ms
  cycle_period: 200ms
  node_lost_timeout: 2s
  agent_sync_wait: 200ms
  kill_after: 2s
  checkpoint_root: )" +
         checkpoints + "\n";
}

// A training task: says where it stands, resumes from its checkpoint, records its pid (per rank
// and run), and on the checkpoint signal saves its state, says so with `arbiter checkpoint` and
// stops.
constexpr const char* kTrain = R"sh(
state="$ARBITER_CHECKPOINT_DIR/state-$RANK"
echo "rank=$RANK world=$WORLD_SIZE master=$MASTER_ADDR:$MASTER_PORT local=$LOCAL_RANK gpus=$CUDA_VISIBLE_DEVICES"
if [ -f "$state" ]; then echo "resumed from $(cat "$state")"; else echo "fresh start"; fi
echo $$ > "$ARBITER_CHECKPOINT_DIR/pid-$RANK-$ARBITER_RUN"
trap 'echo "checkpoint signal"; echo "step 42" > "$state"; "$ARBITER" checkpoint; exit 0' USR1
while [ ! -f "$ARBITER_CHECKPOINT_DIR/finish" ] && [ -d "$ARBITER_CHECKPOINT_DIR" ]; do sleep 0.1; done
echo finished
)sh";

Json Job(const std::string& name, const std::string& cls, int tasks, int gpus,
         const std::string& script, int max_retries = 0) {
  return Json{{"name", name},
              {"queue", "main"},
              {"priority_class", cls},
              {"groups", Json::array({{{"tasks", tasks}, {"gpu_milli", gpus * 1000}}})},
              {"argv", Json::array({"/bin/sh", "-c", script})},
              {"env", {{"ARBITER", ARBITER_BINARY}}},
              {"max_retries", max_retries}};
}

// Whether a process is alive (a zombie is not).
bool Alive(int pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(stat, text)) return false;
  const auto close = text.rfind(')');
  return close != std::string::npos && close + 2 < text.size() && text[close + 2] != 'Z';
}

int ReadPid(const std::filesystem::path& file) {
  std::ifstream in(file);
  int pid = 0;
  in >> pid;
  return pid;
}

class AgentTest : public ::testing::Test {
 protected:
  void SetUp() override { Boot({0, 1, 2}); }

  // A server on `host_` and agents for the nodes `nodes`.
  void Boot(const std::vector<int>& nodes) {
    checkpoints_ = (dir_.path() / "checkpoints").string();
    config_ = dir_.Write("cluster.yaml", ClusterYaml(checkpoints_));
    StartServer(host_ + ":0");
    ASSERT_TRUE(server_->ready());
    for (int i : nodes) StartAgent(i);
    ASSERT_TRUE(WaitFor([&] { return ReadyAgents() == static_cast<int>(nodes.size()); }))
        << Nodes().dump();
  }

  // Tasks outlive their agents by design: what a test leaves running is killed here.
  void TearDown() override {
    for (auto& a : agents_) a.reset();
    std::error_code ec;
    for (const auto& job : std::filesystem::directory_iterator(checkpoints_, ec)) {
      for (const auto& f : std::filesystem::directory_iterator(job.path(), ec)) {
        if (f.path().filename().string().rfind("pid-", 0) == 0) {
          if (const int pid = ReadPid(f.path()); pid > 0) ::kill(-pid, SIGKILL);
        }
      }
    }
  }

  void StartServer(const std::string& listen) {
    // The partition test's server listens on an address of its own network (plain HTTP there).
    std::vector<std::string> extra;
    if (listen.rfind("127.", 0) != 0) extra.push_back("--insecure-http");
    server_.emplace(config_, (dir_.path() / "data").string(), std::move(extra), listen);
  }
  void StartAgent(int i, const std::string& address = "127.0.0.1",
                  std::vector<std::string> wrapper = {}) {
    agents_[i] = std::make_unique<AgentProcess>(
        ServerAddress(), kAgentToken, "n-" + std::to_string(i), "2xG-40G",
        (dir_.path() / ("agent-" + std::to_string(i))).string(), address, std::move(wrapper));
  }
  std::string ServerAddress() const { return host_ + ":" + std::to_string(port()); }
  int port() const { return server_->port(); }
  Json Nodes() { return Api(kAdmin, "GET", "/v1/nodes").body; }
  Reply Api(const std::string& token, const std::string& method, const std::string& path,
            const std::string& body = "") {
    return CallAt(host_, port(), token, method, path, body);
  }
  int ReadyAgents() {
    int n = 0;
    for (const Json& node : Nodes().value("nodes", Json::array())) {
      if (node["agent"].is_object() && node["agent"]["state"] == "ready") ++n;
    }
    return n;
  }
  std::uint64_t Submit(const Json& job) {
    Reply r = Api(kAdmin, "POST", "/v1/jobs", job.dump());
    EXPECT_EQ(r.status, 201) << r.body.dump();
    return r.status == 201 ? r.body["id"].get<std::uint64_t>() : 0;
  }
  Json GetJob(std::uint64_t id) {
    return Api(kAdmin, "GET", "/v1/jobs/" + std::to_string(id)).body;
  }
  std::string State(std::uint64_t id) { return GetJob(id)["status"].value("state", "?"); }
  std::vector<std::string> Kinds(std::uint64_t id) {
    std::vector<std::string> kinds;
    Reply events = Api(kAdmin, "GET", "/v1/events?cursor=0&limit=10000");
    for (const Json& e : events.body["events"]) {
      if (e.value("job", 0) == static_cast<int>(id)) kinds.push_back(e["kind"]);
    }
    return kinds;
  }
  std::string Log(std::uint64_t id, int task) {
    CommandResult r = RunCli(ServerAddress(), kAdmin, fmt::format("logs {} --task {}", id, task));
    return r.status == 0 ? r.output : "";
  }
  std::filesystem::path JobDir(std::uint64_t id) const {
    return std::filesystem::path(checkpoints_) / ("job-" + std::to_string(id));
  }
  // The pid of a job's only run of `rank`, once its pid file holds it (the file may be seen
  // created before the task has written it); 0 when none comes.
  int WaitPid(std::uint64_t id, int rank) {
    int pid = 0;
    WaitFor([&] {
      const std::vector<std::filesystem::path> files = PidFiles(id, rank);
      pid = files.size() == 1 ? ReadPid(files[0]) : 0;
      return pid > 0;
    });
    return pid;
  }
  // The pid files of a job's runs of one rank.
  std::vector<std::filesystem::path> PidFiles(std::uint64_t id, int rank) const {
    std::vector<std::filesystem::path> out;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(JobDir(id), ec)) {
      if (e.path().filename().string().rfind("pid-" + std::to_string(rank) + "-", 0) == 0)
        out.push_back(e.path());
    }
    return out;
  }

  TempDir dir_;
  std::string host_ = "127.0.0.1";  // where the server listens
  std::string config_, checkpoints_;
  std::optional<ServerProcess> server_;
  std::unique_ptr<AgentProcess> agents_[3];
};

TEST_F(AgentTest, EvictionCheckpointsThenThePreemptorRunsAndTheVictimResumes) {
  // A P1 gang over every GPU of the cluster: three tasks of two GPUs, one per node.
  const std::uint64_t train = Submit(Job("train", "P1", 3, 2, kTrain));
  for (int rank = 0; rank < 3; ++rank) {
    ASSERT_TRUE(WaitFor([&] { return Log(train, rank).find("fresh start") != std::string::npos; }))
        << "rank " << rank << ": " << Log(train, rank) << GetJob(train).dump();
    const std::string log = Log(train, rank);
    // torch.distributed's variables: one rendezvous for the gang.
    EXPECT_NE(log.find(fmt::format("rank={} world=3 master=127.0.0.1:{} local=0 gpus=0,1", rank,
                                   29500 + train)),
              std::string::npos)
        << log;
  }
  // A P0 arrival needs a whole node: the gang is evicted, checkpoints and stops.
  const std::uint64_t serve =
      Submit(Job("serve", "P0", 1, 2, "echo serving on $CUDA_VISIBLE_DEVICES"));
  ASSERT_TRUE(WaitFor([&] { return State(serve) == "completed"; })) << GetJob(serve).dump();
  EXPECT_NE(Log(serve, 0).find("serving on 0,1"), std::string::npos) << Log(serve, 0);
  const std::vector<std::string> kinds = Kinds(train);
  const auto at = [&](const char* kind) {
    return std::find(kinds.begin(), kinds.end(), kind) - kinds.begin();
  };
  ASSERT_LT(at("eviction_signalled"), static_cast<std::ptrdiff_t>(kinds.size()));
  ASSERT_LT(at("evicted"), static_cast<std::ptrdiff_t>(kinds.size()));
  EXPECT_LT(at("checkpointed"), at("evicted"));  // the checkpoint was reported before the stop
  // The victim's tasks got the signal and saved; the server recorded the checkpoint.
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_TRUE(std::filesystem::exists(JobDir(train) / ("state-" + std::to_string(rank))));
  }
  EXPECT_TRUE(GetJob(train)["status"].contains("last_checkpoint_ms")) << GetJob(train).dump();
  // It runs again and resumes from its checkpoint.
  ASSERT_TRUE(WaitFor([&] {
    return Log(train, 0).find("resumed from step 42") != std::string::npos;
  })) << Log(train, 0);
  EXPECT_NE(Log(train, 0).find("checkpoint signal"), std::string::npos);
  // Finished: every task exits 0, the job completes.
  std::ofstream(JobDir(train) / "finish") << "\n";
  ASSERT_TRUE(WaitFor([&] { return State(train) == "completed"; })) << GetJob(train).dump();
  for (int rank = 0; rank < 3; ++rank) {
    for (const auto& pid : PidFiles(train, rank)) EXPECT_FALSE(Alive(ReadPid(pid))) << pid;
  }
}

TEST_F(AgentTest, LostNodeRerunsTheJobElsewhereAndItsAgentKillsTheStaleTask) {
  const std::uint64_t job = Submit(Job("sleeper", "P1", 1, 2, kTrain, /*max_retries=*/1));
  const int first = WaitPid(job, 0);
  ASSERT_GT(first, 0) << GetJob(job).dump();
  const std::string node = GetJob(job)["status"]["allocation"]["tasks"][0]["node"];
  ASSERT_TRUE(Alive(first));
  const int index = node.back() - '0';
  agents_[index]->Stop(SIGKILL);
  // Silent past the timeout: the node is lost, the job runs again on another node.
  ASSERT_TRUE(WaitFor([&] { return PidFiles(job, 0).size() == 2; })) << GetJob(job).dump();
  const Json status = GetJob(job)["status"];
  EXPECT_EQ(status["state"], "running");
  EXPECT_EQ(status.value("retries", 0), 1);
  EXPECT_NE(status["allocation"]["tasks"][0]["node"], node);
  const Json listed = Nodes();  // (the loop reads it: not a part of a temporary)
  for (const Json& n : listed["nodes"]) {
    if (n["name"] == node) {
      EXPECT_EQ(n["agent"]["state"], "lost");
      EXPECT_FALSE(n["healthy"].get<bool>());
    }
  }
  const CommandResult nodes = RunCli(ServerAddress(), kAdmin, "nodes");
  const std::size_t row = nodes.output.find("\n" + node + " ");
  ASSERT_NE(row, std::string::npos) << nodes.output;
  EXPECT_NE(nodes.output.substr(row, nodes.output.find('\n', row + 1) - row)
                .find(" schedulable (agent lost) "),
            std::string::npos)
      << nodes.output;
  // Its task outlived its agent; the agent comes back and kills it: it runs elsewhere now.
  EXPECT_TRUE(Alive(first));
  StartAgent(index);
  EXPECT_TRUE(WaitFor([&] { return !Alive(first); }));
  EXPECT_TRUE(WaitFor([&] { return ReadyAgents() == 3; }));
  EXPECT_EQ(State(job), "running");
  // The node's health is in the event log: ready when each agent joined, lost, ready again.
  std::vector<std::string> health;
  EXPECT_TRUE(WaitFor([&] {
    health.clear();
    const Reply events = Api(kAdmin, "GET", "/v1/events?cursor=0&limit=10000");
    for (const Json& e : events.body["events"]) {
      const std::string kind = e["kind"];
      if (kind.rfind("node_", 0) == 0 && e.value("target", "") == node) health.push_back(kind);
    }
    return health.size() == 3;
  }));
  EXPECT_EQ(health, (std::vector<std::string>{"node_ready", "node_lost", "node_ready"}));
}

TEST_F(AgentTest, ServerAndAgentRestartsLoseAndDuplicateNothing) {
  const std::uint64_t job = Submit(Job("pair", "P1", 2, 2, kTrain));
  ASSERT_TRUE(WaitFor([&] { return PidFiles(job, 0).size() == 1 && PidFiles(job, 1).size() == 1; }))
      << GetJob(job).dump();
  // kill -9 of the server; it comes back on the same port, the agents register again.
  const int old_port = port();
  server_->Stop(SIGKILL);
  StartServer(host_ + ":" + std::to_string(old_port));
  ASSERT_TRUE(server_->ready());
  ASSERT_TRUE(WaitFor([&] { return ReadyAgents() == 3; })) << Nodes().dump();
  EXPECT_EQ(State(job), "running");
  // kill -9 of the agent of rank 0's node, started again at once: it adopts the task.
  const std::string node = GetJob(job)["status"]["allocation"]["tasks"][0]["node"];
  const int index = node.back() - '0';
  agents_[index]->Stop(SIGKILL);
  StartAgent(index);
  ASSERT_TRUE(WaitFor([&] { return ReadyAgents() == 3; })) << Nodes().dump();
  std::ofstream(JobDir(job) / "finish") << "\n";
  ASSERT_TRUE(WaitFor([&] { return State(job) == "completed"; })) << GetJob(job).dump();
  // One run of each task, started once.
  EXPECT_EQ(PidFiles(job, 0).size(), 1u);
  EXPECT_EQ(PidFiles(job, 1).size(), 1u);
  const std::vector<std::string> kinds = Kinds(job);
  EXPECT_EQ(std::count(kinds.begin(), kinds.end(), "started"), 1);
  EXPECT_NE(Log(job, 0).find("finished"), std::string::npos) << Log(job, 0);
}

// Rotating the server's node key revokes every node credential: the agents find theirs refused
// and join again with their join token, by themselves, and their running tasks are kept.
TEST_F(AgentTest, ARotatedNodeKeyMakesEveryAgentJoinAgain) {
  const std::uint64_t job = Submit(Job("kept", "P1", 1, 1, kTrain));
  ASSERT_TRUE(WaitFor([&] { return PidFiles(job, 0).size() == 1; })) << GetJob(job).dump();
  std::string before;
  std::ifstream(dir_.path() / "agent-0" / "node-credential") >> before;
  const int old_port = port();
  server_->Stop(SIGTERM);
  std::filesystem::remove(dir_.path() / "data" / "node-credentials.key");
  StartServer(host_ + ":" + std::to_string(old_port));
  ASSERT_TRUE(server_->ready());
  ASSERT_TRUE(WaitFor([&] { return ReadyAgents() == 3; })) << Nodes().dump();
  std::string after;
  ASSERT_TRUE(WaitFor([&] {
    std::ifstream(dir_.path() / "agent-0" / "node-credential") >> after;
    return !after.empty() && after != before;
  }));
  EXPECT_EQ(Api(before, "POST", "/v1/nodes/n-0/sync", "{}").status, 401);
  EXPECT_EQ(State(job), "running");
  EXPECT_EQ(PidFiles(job, 0).size(), 1u);
}

TEST_F(AgentTest, FailedRunsAreRetriedThenFailAndACancelStopsTheTask) {
  const std::uint64_t job = Submit(Job("flaky", "P1", 1, 1, "echo trying; exit 3", 1));
  ASSERT_TRUE(WaitFor([&] { return State(job) == "failed"; })) << GetJob(job).dump();
  const Json status = GetJob(job)["status"];
  EXPECT_EQ(status.value("retries", 0), 1);
  EXPECT_EQ(status["message"], "task 0 exited with code 3; no retry left (max_retries 1)");
  const std::vector<std::string> kinds = Kinds(job);
  EXPECT_EQ(std::count(kinds.begin(), kinds.end(), "retried"), 1);
  EXPECT_EQ(std::count(kinds.begin(), kinds.end(), "started"), 2);
  // A program that is not there fails as a shell would say: 127, with the reason in the log.
  Json missing = Job("missing", "P1", 1, 1, "");
  missing["argv"] = Json::array({"no-such-program-arbiter-test"});
  const std::uint64_t bad = Submit(missing);
  ASSERT_TRUE(WaitFor([&] { return State(bad) == "failed"; })) << GetJob(bad).dump();
  EXPECT_EQ(GetJob(bad)["status"]["message"], "task 0 exited with code 127");
  EXPECT_NE(Log(bad, 0).find("cannot start the task"), std::string::npos) << Log(bad, 0);
  // A cancelled job's task is stopped.
  const std::uint64_t sleeper = Submit(Job("sleeper", "P1", 1, 1, kTrain));
  const int pid = WaitPid(sleeper, 0);
  ASSERT_GT(pid, 0);
  ASSERT_TRUE(WaitFor([&] { return Alive(pid); }));
  EXPECT_EQ(RunCli(ServerAddress(), kAdmin, fmt::format("cancel {}", sleeper)).status, 0);
  EXPECT_TRUE(WaitFor([&] { return !Alive(pid); }));
  // Without agents' nodes to run it, a job must say what to run.
  Json nothing = Job("nothing", "P1", 1, 1, "");
  nothing.erase("argv");
  Reply refused = Api(kAdmin, "POST", "/v1/jobs", nothing.dump());
  EXPECT_EQ(refused.status, 400);
  EXPECT_EQ(refused.body["error"]["field"], "argv") << refused.body.dump();
}

TEST_F(AgentTest, AnAgentIsCheckedAgainstTheConfigurationAndItsLabelsJoinTheNode) {
  agents_[0]->Stop(SIGTERM);
  // The node is still registered (not yet lost): its join token may not take it over, its own
  // credential (kept by the agent) registers it again.
  EXPECT_EQ(Api(kAgentToken, "POST", "/v1/nodes/n-0/register",
                R"({"devices": [{"model": "G"}, {"model": "G"}]})")
                .status,
            409);
  std::string credential;
  std::ifstream(dir_.path() / "agent-0" / "node-credential") >> credential;
  ASSERT_EQ(credential.rfind("arbiter-node.n-0.", 0), 0u) << credential;
  Reply wrong = Api(credential, "POST", "/v1/nodes/n-0/register",
                    R"({"devices": [{"model": "G", "memory_mib": 40960}]})");
  EXPECT_EQ(wrong.status, 409);
  EXPECT_EQ(wrong.body["error"]["message"],
            "devices: node n-0 does not have what the configuration says: 2 G GPU(s) "
            "configured, 1 found");
  // Only agents register nodes, and only configured ones.
  EXPECT_EQ(Api(kAdmin, "POST", "/v1/nodes/n-0/register", "{}").status, 403);
  EXPECT_EQ(Api(kAgentToken, "POST", "/v1/nodes/n-9/register", "{}").status, 404);
  // The labels an agent reports join the node's: node selectors find them.
  EXPECT_EQ(Api(credential, "POST", "/v1/nodes/n-0/register",
                R"({"devices": [{"model": "G"}, {"model": "G"}], "labels": {"zone": 7}})")
                .body["error"]["field"],
            "labels.zone");
  // Another node's credential may not register this one.
  EXPECT_EQ(Api(credential, "POST", "/v1/nodes/n-1/register",
                R"({"devices": [{"model": "G"}, {"model": "G"}]})")
                .status,
            403);
  ASSERT_EQ(Api(credential, "POST", "/v1/nodes/n-0/register",
                R"({"devices": [{"model": "G"}, {"model": "G"}], "labels": {"zone": "a"}})")
                .status,
            200);
  Json pinned = Job("pinned", "P1", 1, 1, "true");
  pinned["node_selector"] = {{"zone", "a"}};
  const std::uint64_t id = Submit(pinned);
  ASSERT_TRUE(WaitFor([&] { return State(id) == "running"; })) << GetJob(id).dump();
  EXPECT_EQ(GetJob(id)["status"]["allocation"]["tasks"][0]["node"], "n-0");
  // An agent's token may not submit jobs.
  Reply submit = Api(kAgentToken, "POST", "/v1/jobs", Job("x", "P1", 1, 1, "true").dump());
  EXPECT_EQ(submit.status, 403);
}

// A network partition, made with network namespaces the test creates (root only, else
// skipped): node n-2's agent runs in a namespace of its own, joined to the test's by a veth
// pair, and the server listens on the host end. Cutting the link loses the node (its job runs
// again elsewhere); healing it brings the agent back, which kills its stale task.
class PartitionTest : public AgentTest {
 protected:
  void SetUp() override {
    const int pid = ::getpid();
    ns_ = fmt::format("arbiter-test-{}", pid);
    veth_ = fmt::format("arbv{}", pid % 10000000);
    const std::string subnet = fmt::format("10.{}.{}", 200 + pid % 50, (pid / 50) % 256);
    host_ = subnet + ".1";
    inner_ = subnet + ".2";
    for (const char* path : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"}) {
      if (::access(path, X_OK) == 0) ip_ = path;
    }
    if (ip_.empty() || !Ip("netns add " + ns_)) {
      GTEST_SKIP() << "network namespaces are not available here (needs root and iproute2)";
    }
    made_ = true;
    ASSERT_TRUE(Ip(fmt::format("link add {} type veth peer name {}i", veth_, veth_)));
    ASSERT_TRUE(Ip(fmt::format("link set {}i netns {}", veth_, ns_)));
    ASSERT_TRUE(Ip(fmt::format("addr add {}/30 dev {}", host_, veth_)));
    ASSERT_TRUE(Ip(fmt::format("link set {} up", veth_)));
    ASSERT_TRUE(Ip(fmt::format("-n {} addr add {}/30 dev {}i", ns_, inner_, veth_)));
    ASSERT_TRUE(Ip(fmt::format("-n {} link set {}i up", ns_, veth_)));
    ASSERT_TRUE(Ip(fmt::format("-n {} link set lo up", ns_)));
    Boot({});
  }
  void TearDown() override {
    AgentTest::TearDown();
    if (made_) {
      Ip("link del " + veth_);
      Ip("netns del " + ns_);
    }
  }
  bool Ip(const std::string& args) {
    return std::system((ip_ + " " + args + " >/dev/null 2>&1").c_str()) == 0;
  }

  std::string ip_, ns_, veth_, inner_;
  bool made_ = false;
};

TEST_F(PartitionTest, APartitionedNodeIsLostAndItsAgentKillsTheStaleTaskWhenItReturns) {
  // Only n-2, across the veth pair, to begin with: the job lands there.
  StartAgent(2, inner_, {ip_, "netns", "exec", ns_});
  ASSERT_TRUE(WaitFor([&] { return ReadyAgents() == 1; })) << Nodes().dump();
  const std::uint64_t job = Submit(Job("trainer", "P1", 1, 2, kTrain, /*max_retries=*/1));
  ASSERT_TRUE(WaitFor([&] { return PidFiles(job, 0).size() == 1; })) << GetJob(job).dump();
  EXPECT_EQ(GetJob(job)["status"]["allocation"]["tasks"][0]["node"], "n-2");
  // Its log, across the link.
  EXPECT_TRUE(WaitFor([&] { return Log(job, 0).find("fresh start") != std::string::npos; }))
      << Log(job, 0);
  const int stale = ReadPid(PidFiles(job, 0)[0]);
  StartAgent(0);
  StartAgent(1);
  ASSERT_TRUE(WaitFor([&] { return ReadyAgents() == 3; })) << Nodes().dump();
  // The link goes down: n-2 is lost and the job runs again on another node.
  ASSERT_TRUE(Ip(fmt::format("link set {} down", veth_)));
  ASSERT_TRUE(WaitFor([&] { return PidFiles(job, 0).size() == 2; })) << GetJob(job).dump();
  EXPECT_NE(GetJob(job)["status"]["allocation"]["tasks"][0]["node"], "n-2");
  EXPECT_TRUE(Alive(stale));  // unseen on the other side of the partition
  // The link comes back: the agent registers again and kills the task it should not run.
  ASSERT_TRUE(Ip(fmt::format("link set {} up", veth_)));
  EXPECT_TRUE(WaitFor([&] { return !Alive(stale); }));
  EXPECT_TRUE(WaitFor([&] { return ReadyAgents() == 3; })) << Nodes().dump();
  EXPECT_EQ(State(job), "running");
}

}  // namespace
}  // namespace arbiter::testing
