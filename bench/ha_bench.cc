#include "ha_bench.h"

#include <fmt/format.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "server_bench.h"
#include "testing/postgres.h"
#include "workload.h"

namespace arbiter::bench {
namespace {

using Clock = std::chrono::steady_clock;

// Four virtual nodes; cycles as soon as something changes.
constexpr const char* kFailoverCluster = R"(
priority_classes:
  - {name: P1, value: 100}
queues:
  - {name: training}
nodes:
  - name: g-{i}
    count: 4
    gpus: {model: H800, count: 8, memory: 80Gi}
    cpu: 192
    memory: 2Ti
server:
  tokens:
    - {name: bench, token: bench-admin-token, role: admin}
  cycle_min_interval: 10ms
  cycle_period: 1s
  max_active_jobs_per_user: 0
)";

constexpr const char* kJob =
    R"({"name":"probe","queue":"training","priority_class":"P1","runtime_estimate_ms":3600000,)"
    R"("groups":[{"tasks":1,"gpu_milli":1000}]})";

int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t n = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n) != 0) {
    Fail("failover bench: no free port");
  }
  ::close(fd);
  return ntohs(a.sin_port);
}

// An `arbiter server` process on `port`, its output discarded.
class Process {
 public:
  Process(const std::string& config, const std::string& store, int port) : port_(port) {
    pid_ = ::fork();
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      std::FILE* null = std::freopen("/dev/null", "w", stdout);
      (void)null;
      const std::string listen = "127.0.0.1:" + std::to_string(port);
      ::execl(ARBITER_BINARY, ARBITER_BINARY, "server", "--config", config.c_str(), "--store",
              store.c_str(), "--listen", listen.c_str(), "--dev", "--virtual-nodes", nullptr);
      ::_exit(127);
    }
  }
  ~Process() { Kill(); }
  void Kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  int port() const { return port_; }

 private:
  pid_t pid_ = -1;
  int port_;
};

int Status(int port, const std::string& path) {
  httplib::Client c("127.0.0.1", port);
  c.set_connection_timeout(std::chrono::milliseconds(500));
  httplib::Result r = c.Get(path);
  return r ? r->status : 0;
}

// Submits the probe job to whichever server takes it; returns its id (0: none yet).
std::uint64_t Submit(const std::vector<std::unique_ptr<Process>>& servers) {
  static const httplib::Headers kAuth{{"Authorization", "Bearer bench-admin-token"}};
  for (const auto& s : servers) {
    if (!s) continue;
    httplib::Client c("127.0.0.1", s->port());
    c.set_connection_timeout(std::chrono::milliseconds(500));
    httplib::Result r = c.Post("/v1/jobs", kAuth, kJob, "application/json");
    if (r && r->status == 201) {
      return nlohmann::json::parse(r->body)["id"].get<std::uint64_t>();
    }
  }
  return 0;
}

std::string StateOf(const std::vector<std::unique_ptr<Process>>& servers, std::uint64_t id) {
  static const httplib::Headers kAuth{{"Authorization", "Bearer bench-admin-token"}};
  for (const auto& s : servers) {
    if (!s) continue;
    httplib::Client c("127.0.0.1", s->port());
    httplib::Result r = c.Get("/v1/jobs/" + std::to_string(id), kAuth);
    if (r && r->status == 200) {
      return nlohmann::json::parse(r->body)["status"].value("state", "");
    }
  }
  return "";
}

// A standby's warm copy: how many active jobs it holds (-1: none yet, or no answer).
long long WarmJobs(int port) {
  httplib::Client c("127.0.0.1", port);
  c.set_connection_timeout(std::chrono::milliseconds(500));
  httplib::Result r = c.Get("/metrics");
  if (!r || r->status != 200) return -1;
  const std::string name = "\narbiter_standby_warm_jobs ";
  const std::size_t at = r->body.find(name);
  return at == std::string::npos ? -1 : std::atoll(r->body.c_str() + at + name.size());
}

// `arbiter submit` of the probe to every server, as a user would run it, waiting for it to be
// acknowledged; returns the job's id (0: the command failed).
std::uint64_t SubmitThroughCli(const std::vector<std::unique_ptr<Process>>& servers) {
  std::string list;
  for (const auto& s : servers) {
    if (s) list += (list.empty() ? "" : ",") + fmt::format("http://127.0.0.1:{}", s->port());
  }
  const std::string command = fmt::format(
      "{} submit --server {} --token bench-admin-token --failover-timeout 120s --json "
      "--name probe -q training -p P1 -g 1 -r 1h 2>/dev/null",
      ARBITER_BINARY, list);
  std::FILE* out = ::popen(command.c_str(), "r");
  if (out == nullptr) Fail("failover bench: cannot run arbiter submit");
  std::string text;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, out)) > 0;) text.append(buf, n);
  if (::pclose(out) != 0) return 0;
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  return j.is_object() ? j.value("id", std::uint64_t{0}) : 0;
}

// `kills` times, once the standby is warm: SIGKILL of the leader of two servers, then a probe
// job submitted to whichever server takes it, waited for until the new leader places it
// (`NAME`), and at the same time `arbiter submit` of another through both addresses, until it is
// acknowledged (`NAME_cli`). With `held_jobs`, the store first holds that many more jobs (held:
// active, so every takeover recovers them, but never placed), copies of a first one made with
// SQL.
void RunFailover(testing::PostgresInstance& pg, int kills, long long held_jobs,
                 const std::string& name) {
  TempDir dir("arbiter-failover-bench");
  const std::string config = dir.path() + "/cluster.yaml";
  std::ofstream(config) << kFailoverCluster;
  const std::string store = pg.NewDatabase();
  const std::string db =
      store.substr(store.find(":///") + 4, store.find('?') - store.find(":///") - 4);
  std::vector<std::unique_ptr<Process>> servers;
  servers.push_back(std::make_unique<Process>(config, store, FreePort()));
  auto leader = [&]() -> int {
    for (std::size_t i = 0; i < servers.size(); ++i) {
      if (servers[i] && Status(servers[i]->port(), "/readyz") == 200) return static_cast<int>(i);
    }
    return -1;
  };
  auto wait_until = [](const auto& done, double seconds, const char* what) {
    const auto end = Clock::now() + std::chrono::duration<double>(seconds);
    while (!done()) {
      if (Clock::now() > end) Fail(std::string("failover bench: ") + what);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  };
  int l = -1;
  wait_until([&] { return (l = leader()) >= 0; }, 60, "no server led");
  if (held_jobs > 0) {
    wait_until([&] { return Submit(servers) != 0; }, 60, "the template job was not taken");
    servers[0]->Kill();
    pg.Sql(db, fmt::format(
                   "INSERT INTO jobs (id, name, user_name, queue, priority_class, submit_time, "
                   "spec, state) SELECT g, name, user_name, queue, priority_class, submit_time, "
                   "spec, 'held' FROM jobs, generate_series(2, {}) g WHERE id = 1",
                   held_jobs + 1));
    pg.Sql(db, fmt::format("UPDATE counters SET last_job_id = {}", held_jobs + 1));
    servers[0] = std::make_unique<Process>(config, store, FreePort());
    wait_until([&] { return (l = leader()) >= 0; }, 600, "no server led the large store");
  }
  servers.push_back(std::make_unique<Process>(config, store, FreePort()));
  std::vector<double> placed, acknowledged;
  for (int k = 0; k < kills; ++k) {
    // Both up, the standby warm: its copy holds the store's active jobs.
    wait_until([&] { return WarmJobs(servers[1 - l]->port()) >= held_jobs; }, 600,
               "the standby did not warm up");
    servers[static_cast<std::size_t>(l)]->Kill();
    const auto killed = Clock::now();
    // Two probes at once: `arbiter submit`, as a user runs it, and this process's own requests
    // (every 5 ms to each server) whose job is waited for until the new leader places it.
    std::uint64_t cli_id = 0;
    double cli_s = 0;
    std::thread cli([&] {
      cli_id = SubmitThroughCli(servers);
      cli_s = std::chrono::duration<double>(Clock::now() - killed).count();
    });
    std::uint64_t id = 0;
    wait_until([&] { return (id = Submit(servers)) != 0; }, 600, "no server took over");
    wait_until(
        [&] {
          const std::string s = StateOf(servers, id);
          return s == "running" || s == "completed";
        },
        600, "the probe job never ran");
    placed.push_back(std::chrono::duration<double>(Clock::now() - killed).count());
    cli.join();
    if (cli_id == 0) Fail("failover bench: arbiter submit gave up");
    acknowledged.push_back(cli_s);
    // The killed server starts again (as a supervisor restarts it) and stands by.
    servers[static_cast<std::size_t>(l)] = std::make_unique<Process>(config, store, FreePort());
    wait_until([&] { return (l = leader()) >= 0; }, 600, "no leader after the restart");
  }
  std::printf(
      "# %s: %d kills (SIGKILL) of the leader of 2 servers on PostgreSQL, lease 5s, %lld held "
      "jobs in the store, the standby warm; from the kill to the first job placed by the new "
      "leader (%s) and to `arbiter submit` acknowledged (%s_cli)\n",
      name.c_str(), kills, held_jobs, name.c_str(), name.c_str());
  std::printf("BENCH %s_p50_s %.6g s\n", name.c_str(), Percentile(placed, 0.50));
  std::printf("BENCH %s_p99_s %.6g s\n", name.c_str(), Percentile(placed, 0.99));
  std::printf("BENCH %s_cli_p50_s %.6g s\n", name.c_str(), Percentile(acknowledged, 0.50));
  std::printf("BENCH %s_cli_p99_s %.6g s\n", name.c_str(), Percentile(acknowledged, 0.99));
  std::fflush(stdout);
}

}  // namespace

void RunHaBench(int clients, double seconds, int kills) {
  std::string error;
  std::unique_ptr<testing::PostgresInstance> pg = testing::PostgresInstance::Start(&error);
  if (!pg) Fail("ha bench: " + error);
  const SubmitFigures f =
      RunSubmitClients(clients, seconds, "pg_submit", "", false, pg->NewDatabase());
  std::printf("BENCH pg_submit_p99_ms %.6g ms\n", f.p99_us / 1000);
  std::fflush(stdout);
  RunFailover(*pg, kills, 0, "failover");
  // A store whose recovery takes longer than the lease (ARBITER_BENCH_FAILOVER_JOBS, default a
  // million; 0 skips it).
  const char* jobs = std::getenv("ARBITER_BENCH_FAILOVER_JOBS");
  const long long held = jobs ? std::atoll(jobs) : 1'000'000;
  if (held > 0) {
    RunFailover(*pg, kills, held,
                held == 1'000'000 ? "failover_1m" : fmt::format("failover_{}", held));
  }
}

}  // namespace arbiter::bench
