// The CLI benchmark: `arbiter submit` as a process per job against a real server, its wall time,
// its CPU time and its rate with 1 and 8 clients at once.
#include "cli_bench.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/state/cluster_state.h"
#include "server/server.h"
#include "server_bench.h"
#include "workload.h"

extern char** environ;  // NOLINT(readability-redundant-declaration): POSIX declares it nowhere

namespace arbiter::bench {
namespace {

constexpr const char* kCluster = kServerBenchCluster;

double CpuSecondsOfChildren() {
  rusage u{};
  ::getrusage(RUSAGE_CHILDREN, &u);
  auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec);
  };
  return seconds(u.ru_utime) + seconds(u.ru_stime);
}

// Runs `argv` (standard output to /dev/null) and waits for it; fails the benchmark unless it
// exits 0.
void RunOnce(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) Fail("cli bench: cannot run " + args[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) Fail("cli bench: " + args[0] + " failed");
}

struct Figures {
  double calls = 0, wall_s = 0, cpu_ms = 0, median_ms = 0;
};

// `clients` threads, each running `args` one process after another for `seconds`.
Figures Measure(const std::vector<std::string>& args, int clients, double seconds) {
  const double cpu0 = CpuSecondsOfChildren();
  TimedRun run = RunClosedLoop(clients, seconds,
                               [&](int) { return [&args](std::int64_t) { RunOnce(args); }; });
  Figures f;
  f.calls = static_cast<double>(run.latencies_us.size());
  f.wall_s = run.wall_seconds;
  f.cpu_ms = 1000 * (CpuSecondsOfChildren() - cpu0) / f.calls;
  f.median_ms = Percentile(run.latencies_us, 0.5) / 1000;
  return f;
}

}  // namespace

void RunCliBench(double seconds) {
  TempDir dir("arbiter-cli-bench");
  const std::string config = dir.path() + "/cluster.yaml";
  std::ofstream(config) << kCluster;
  server::ServerArgs args;
  args.config = config;
  args.data = dir.path() + "/data";
  args.dev = true;  // the token is written in the configuration
  args.listen = "127.0.0.1:0";
  args.virtual_nodes = true;
  args.threads = 16;
  Result<std::unique_ptr<server::Server>> server = server::Server::Start(args);
  if (!server.ok()) Fail(server.status().message());

  // The command finds the server and its token as a user's shell gives them; no client file.
  ::setenv("ARBITER_SERVER", ("http://127.0.0.1:" + std::to_string((*server)->port())).c_str(), 1);
  ::setenv("ARBITER_TOKEN", "bench-admin-token", 1);
  ::setenv("ARBITER_CONFIG", (dir.path() + "/no-client.yaml").c_str(), 1);
  ::unsetenv("ARBITER_TOKEN_FILE");
  ::unsetenv("ARBITER_CA_FILE");
  const std::string binary = ARBITER_BINARY;
  const std::vector<std::string> submit = {binary,
                                           "submit",
                                           "-q",
                                           "training",
                                           "-p",
                                           "P1",
                                           "-n",
                                           "2",
                                           "-g",
                                           "8",
                                           "-t",
                                           "H800",
                                           "--topology",
                                           "leaf",
                                           "-r",
                                           "4h",
                                           "--checkpoint-interval",
                                           "30m",
                                           "--sh",
                                           "torchrun --nproc-per-node 8 train.py"};
  for (int i = 0; i < 5; ++i) RunOnce(submit);  // the store and the page cache warm

  const Figures one = Measure(submit, 1, seconds);
  const Figures eight = Measure(submit, 8, seconds);
  const Figures baseline = Measure({"/bin/true"}, 1, seconds / 3);
  std::vector<std::string> full = submit;
  full[0] = binary.substr(0, binary.rfind('/') + 1) + "arbiter-full";
  const Figures whole = Measure(full, 1, seconds / 3);

  std::printf("# cli: %.0f submits one after another in %.2f s, %.0f with 8 clients in %.2f s\n",
              one.calls, one.wall_s, eight.calls, eight.wall_s);
  std::printf(
      "# cli: /bin/true takes %.3f ms (%.3f ms of CPU) to start and end here; "
      "arbiter-full submit %.3f ms (%.3f ms of CPU)\n",
      baseline.median_ms, baseline.cpu_ms, whole.median_ms, whole.cpu_ms);
  std::printf("# cli: with 8 clients a submit takes %.3f ms (median), %.3f ms of client CPU\n",
              eight.median_ms, eight.cpu_ms);
  std::printf("BENCH cli_submit_ms %.4g ms\n", one.median_ms);
  std::printf("BENCH cli_submit_cpu_ms %.4g ms\n", one.cpu_ms);
  std::printf("BENCH cli_submit_per_s_1 %.6g submits/s\n", one.calls / one.wall_s);
  std::printf("BENCH cli_submit_per_s_8 %.6g submits/s\n", eight.calls / eight.wall_s);
  std::fflush(stdout);
}

}  // namespace arbiter::bench
