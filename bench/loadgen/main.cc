// arbiter_loadgen: the control plane under a cluster's load (issue 19, item 4). N simulated node
// agents speak the real sync protocol over real connections (each pretending to run the tasks it
// is given, checkpointing and ending them at their runtime), M watchers read the event stream, and
// an open-loop stream of submissions and /healthz probes runs against one server over loopback;
// the server is started here (`--server-bin`) or already running (`--url`). It prints BENCH lines
// (bench/README.md, "The load generator").
#include <fmt/format.h>
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "loadgen/load.h"
#include "loadgen/server_process.h"
#include "loadgen/workload.h"

namespace {

using namespace arbiter::loadgen;  // NOLINT(google-build-using-namespace): the tool's own code

// The p-quantile (0..1) of `v` (reordered), as the other benchmarks compute it.
// Without values: NaN (printed "nan"), not a latency of 0.
double Percentile(std::vector<double>& v, double p) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  const auto k = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

// Raises the soft limit on open files to the hard limit; says so when even that is below `need`.
void RaiseFileLimit(std::uint64_t need) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  if (limit.rlim_cur != limit.rlim_max) {
    const rlim_t before = limit.rlim_cur;
    limit.rlim_cur = limit.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &limit) == 0)
      fmt::print("# loadgen: open files limit raised from {} to {}\n", before, limit.rlim_max);
  }
  if (limit.rlim_max != RLIM_INFINITY && limit.rlim_max < need) {
    fmt::print(
        "# loadgen: the open files hard limit is {}, below the {} this load needs (and the server "
        "it starts inherits it): connections past it fail (raise it as root: ulimit -Hn)\n",
        limit.rlim_max, need);
  }
}

// http://HOST:PORT (an IP address, or localhost) into its host and port.
bool ParseUrl(const std::string& url, std::string& host, int& port) {
  const std::string scheme = "http://";
  if (url.rfind(scheme, 0) != 0) return false;
  std::string rest = url.substr(scheme.size());
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  const auto colon = rest.rfind(':');
  if (colon == std::string::npos) return false;
  host = rest.substr(0, colon);
  if (host == "localhost") host = "127.0.0.1";
  port = std::atoi(rest.substr(colon + 1).c_str());
  return !host.empty() && port > 0 && port < 65536;
}

void Line(const std::string& name, double value, const char* unit) {
  fmt::print("BENCH {} {:.6g} {}\n", name, value, unit);
}

void Report(const LoadOptions& o, LoadResults& r) {
  const double window = std::max(r.window_s, 1e-9);
  fmt::print(
      "# loadgen: window {:.1f} s; {} of {} agents registered at its start, {} synced in its last "
      "10 s; {} of {} watchers streaming at its end; sync answers by {}\n",
      r.window_s, r.agents_registered, o.shape.nodes, r.agents_live, r.watchers_streaming,
      o.watchers, r.sync_form.empty() ? "(none)" : r.sync_form);
  if (!r.event_kinds.empty()) {
    std::string kinds;
    for (const auto& [kind, count] : r.event_kinds)
      kinds += fmt::format("{}{} {}", kinds.empty() ? "" : ", ", kind, count);
    fmt::print("# loadgen: the first watcher's events in the window: {}\n", kinds);
  }
  if (r.server_died) fmt::print("# loadgen: the server exited during the run\n");
  if (r.interrupted) fmt::print("# loadgen: interrupted; the window was cut short\n");
  Line("loadgen_agents", o.shape.nodes, "agents");
  Line("loadgen_watchers", o.watchers, "watchers");
  Line("loadgen_submit_p50_ms", Percentile(r.submit_ms, 0.50), "ms");
  Line("loadgen_submit_p99_ms", Percentile(r.submit_ms, 0.99), "ms");
  Line("loadgen_healthz_p50_ms", Percentile(r.healthz_ms, 0.50), "ms");
  Line("loadgen_healthz_p99_ms", Percentile(r.healthz_ms, 0.99), "ms");
  Line("loadgen_assign_p50_ms", Percentile(r.assign_ms, 0.50), "ms");
  Line("loadgen_assign_p99_ms", Percentile(r.assign_ms, 0.99), "ms");
  if (!r.event_lag_ms.empty()) {
    Line("loadgen_event_lag_p50_ms", Percentile(r.event_lag_ms, 0.50), "ms");
    Line("loadgen_event_lag_p99_ms", Percentile(r.event_lag_ms, 0.99), "ms");
  }
  if (r.sampled) {
    Line("loadgen_server_threads", static_cast<double>(r.server_threads_max), "threads");
    Line("loadgen_server_rss_mib", r.server_rss_mib_max, "MiB");
    Line("loadgen_server_cpu_cores", r.server_cpu_cores, "cores");
  }
  Line("loadgen_submitted", static_cast<double>(r.submitted), "jobs");
  Line("loadgen_submit_per_s", static_cast<double>(r.submitted) / window, "jobs/s");
  Line("loadgen_assigned", static_cast<double>(r.assigned), "tasks");
  Line("loadgen_completed", static_cast<double>(r.completed), "tasks");
  Line("loadgen_stopped", static_cast<double>(r.stopped), "tasks");
  Line("loadgen_syncs_per_s", static_cast<double>(r.syncs) / window, "syncs/s");
  Line("loadgen_events", static_cast<double>(r.events), "events");
  Line("loadgen_events_per_s", static_cast<double>(r.events) / window, "events/s");
  Line("loadgen_registrations", static_cast<double>(r.registrations), "registrations");
  Line("loadgen_self_cpu_cores", r.self_cpu_cores, "cores");
  Line("loadgen_loop_lag_p99_ms", Percentile(r.loop_lag_ms, 0.99), "ms");
  std::uint64_t errors = 0;
  for (const auto& [kind, count] : r.errors) {
    Line("loadgen_errors_" + kind, static_cast<double>(count), "errors");
    errors += count;
  }
  Line("loadgen_errors", static_cast<double>(errors), "errors");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "arbiter_loadgen: simulated node agents, event watchers, submissions and health probes "
      "against one arbiter server over loopback (bench/README.md)"};
  std::string server_bin, url;
  int server_pid = -1;
  std::uint32_t agents = 10'000, gpus_per_node = 8, watchers = 1000, watchers_per_token = 4;
  int submitters = 8;
  double submit_rate = 500, healthz_rate = 20, duration = 60, warmup = 10;
  double min_runtime = 20, max_runtime = 120;
  std::uint64_t seed = 1;
  bool keep = false;
  Tokens given;
  app.add_option("--server-bin", server_bin,
                 "The arbiter binary: start `BIN server` on a free loopback port with a cluster "
                 "file written for the load");
  app.add_option("--url", url, "Or an arbiter server already running (http://HOST:PORT)");
  app.add_option("--token-agent", given.agent, "With --url: the agent join token");
  app.add_option("--token-user", given.user,
                 "With --url: a user token that submits to train, infer and batch (and watches)");
  app.add_option("--server-pid", server_pid,
                 "With --url: the server's pid, to sample its threads, memory and CPU");
  app.add_option("--agents", agents, "Simulated node agents (nodes node-0 ...; default 10000)");
  app.add_option("--gpus-per-node", gpus_per_node, "GPUs per node (default 8)");
  app.add_option("--watchers", watchers, "Event-stream watchers (default 1000)");
  app.add_option("--watchers-per-token", watchers_per_token,
                 "Watchers sharing one user token in the written configuration (default 4: "
                 "today's server lets a token hold 4 streams)");
  app.add_option("--submit-rate", submit_rate, "Submissions per second, open loop (default 500)");
  app.add_option("--submitters", submitters, "Keep-alive connections submitting (default 8)");
  app.add_option("--healthz-rate", healthz_rate, "/healthz probes per second (default 20)");
  app.add_option("--duration", duration, "Seconds measured, after the warmup (default 60)");
  app.add_option("--warmup", warmup, "Seconds for agents to register and sync first (default 10)");
  app.add_option("--min-runtime", min_runtime, "Shortest task runtime, seconds (default 20)");
  app.add_option("--max-runtime", max_runtime, "Longest task runtime, seconds (default 120)");
  app.add_option("--seed", seed, "Seed of the job mix (default 1)");
  app.add_flag("--keep", keep, "Keep the temporary directory (configuration, store, server log)");
  CLI11_PARSE(app, argc, argv);

  if (server_bin.empty() == url.empty()) {
    fmt::print(stderr, "arbiter_loadgen: give --server-bin or --url (one of them)\n");
    return 2;
  }
  if (agents == 0 || gpus_per_node == 0 || submit_rate <= 0 || healthz_rate <= 0 || duration <= 0 ||
      warmup < 0 || min_runtime <= 0 || max_runtime < min_runtime) {
    fmt::print(stderr, "arbiter_loadgen: counts, rates, durations and runtimes must be positive\n");
    return 2;
  }
  LoadOptions o;
  o.shape.nodes = agents;
  o.shape.gpus_per_node = gpus_per_node;
  o.watchers = watchers;
  o.submit_rate = submit_rate;
  o.submitters = submitters;
  o.healthz_rate = healthz_rate;
  o.warmup_s = warmup;
  o.duration_s = duration;
  o.seed = seed;
  o.times.min_runtime_ms = static_cast<std::int64_t>(min_runtime * 1000);
  o.times.max_runtime_ms = static_cast<std::int64_t>(max_runtime * 1000);

  // Every connection is a file: agents, watchers, submitters, the probe, and some to spare. The
  // server started below inherits the raised limit.
  RaiseFileLimit(std::uint64_t{agents} + watchers + static_cast<std::uint64_t>(submitters) + 64);

  std::optional<TempDir> dir;
  ServerProcess server;
  if (!server_bin.empty()) {
    dir.emplace();
    if (keep) dir->Keep();
    o.tokens = MakeTokens(watchers, watchers_per_token);
    const std::string config = dir->path() + "/cluster.yaml";
    std::ofstream(config) << ClusterYaml(o.shape, o.tokens);
    const std::string log = dir->path() + "/server.log";
    if (std::string error = server.Start(server_bin, config, dir->path() + "/data", log);
        !error.empty()) {
      fmt::print(stderr, "arbiter_loadgen: {}\n", error);
      return 1;
    }
    o.port = server.port();
    o.server_pid = server.pid();
    o.server_alive = [&server] { return server.Alive(); };
    fmt::print("# loadgen: server pid {} on port {}, files in {}{}\n", server.pid(), server.port(),
               dir->path(), keep ? " (kept)" : "");
  } else {
    if (!ParseUrl(url, o.host, o.port)) {
      fmt::print(stderr, "arbiter_loadgen: --url must be http://HOST:PORT, got {}\n", url);
      return 2;
    }
    if (given.agent.empty() || given.user.empty()) {
      fmt::print(stderr, "arbiter_loadgen: --url needs --token-agent and --token-user\n");
      return 2;
    }
    o.tokens = given;
    o.server_pid = server_pid;
  }
  if (!WaitReady(o.host, o.port, 120)) {
    fmt::print(stderr, "arbiter_loadgen: the server did not become ready (GET /readyz)\n");
    if (dir) fmt::print(stderr, "{}", FileTail(dir->path() + "/server.log", 2000));
    return 1;
  }
  fmt::print(
      "# loadgen: {} agents x {} GPUs, {} watchers, {} submissions/s, {} /healthz/s; warmup {} s, "
      "measured {} s\n",
      agents, gpus_per_node, watchers, submit_rate, healthz_rate, warmup, duration);
  std::fflush(stdout);
  LoadResults results = RunLoad(o);
  Report(o, results);
  if (dir && (results.server_died || keep))
    fmt::print("# loadgen: server log: {}\n{}", dir->path() + "/server.log",
               results.server_died ? FileTail(dir->path() + "/server.log", 2000) : "");
  server.Stop();
  return results.server_died || results.window_s <= 0 ? 1 : 0;
}
