// The scheduling-cycle benchmark: one full Engine::Schedule of a large pending list on an empty
// cluster, repeated; the figure is placements per second (jobs bound / seconds of the cycle).
//
// A plain main(), not Google Benchmark: one cycle takes seconds, the repetitions and their median
// are ours, and the output is one `BENCH <name> <value> <unit>` line per figure. Lines starting
// with '#' are commentary. See bench/README.md.
//
//   arbiter_bench [--only
//   10k|1k|100k|incremental|memory|preempt|sim|sim10k|sim1m|backlog[-fifo|-default|-fairshare]|fill|store|pg|server|ha|cli]
//                 [--reps N] [--seed N] [--no-clock]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "arbiter/engine.h"
#include "cli_bench.h"
#include "core/state/cluster_state.h"
#include "fill_bench.h"
#include "ha_bench.h"
#include "incremental_bench.h"
#include "memory_bench.h"
#include "preempt_bench.h"
#include "server_bench.h"
#include "sim_bench.h"
#include "store_bench.h"
#include "workload.h"

namespace arbiter::bench {
namespace {

struct Options {
  std::string only;  // empty: every variant
  int reps = 0;      // 0: the variant's default
  std::uint64_t seed = 1;
  bool clock = true;  // give the engine a clock for the per-stage timings
  std::string trace;  // --write-backlog-trace: write the backlog workload there and stop
};

struct Variant {
  const char* name;    // for --only
  const char* suffix;  // appended to every figure's name
  std::uint32_t nodes;
  std::uint32_t jobs;
  int reps;
};

constexpr Variant kVariants[] = {
    {"10k", "", 10'000, 100'000, 3},
    {"1k", "_1k", 1'000, 10'000, 5},
    {"100k", "_100k", 100'000, 1'000'000, 1},
};

double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

void Print(const std::string& name, const char* suffix, double value, const char* unit) {
  std::printf("BENCH %s%s %.6g %s\n", name.c_str(), suffix, value, unit);
}

// FNV-1a over what the plan decided (binds with their devices, unplaced jobs with their reasons):
// equal fingerprints across engine changes mean the same decisions.
std::uint64_t Fingerprint(const Plan& plan) {
  std::uint64_t h = 1469598103934665603ull;
  auto mix = [&h](std::uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 1099511628211ull;
    }
  };
  for (const Bind& b : plan.binds) {
    mix(b.job);
    mix(b.allocation.gpu_type);
    for (const TaskAllocation& t : b.allocation.tasks) {
      mix(t.node);
      for (const DeviceShare& d : t.devices)
        mix((std::uint64_t{d.device} << 32) ^ static_cast<std::uint64_t>(d.gpu.value()));
    }
  }
  for (const Unplaced& u : plan.unplaced) {
    const Reason& r = u.reason;
    mix(u.job);
    mix((static_cast<std::uint64_t>(r.stage) << 16) | (static_cast<std::uint64_t>(r.verdict) << 8) |
        static_cast<std::uint64_t>(r.cause));
    mix(static_cast<std::uint64_t>(r.nodes_total));
    for (const CauseCount& c : r.node_counts)
      mix((static_cast<std::uint64_t>(c.cause) << 32) | static_cast<std::uint32_t>(c.nodes));
    for (char ch : r.detail) mix(static_cast<unsigned char>(ch));
  }
  return h;
}

// Processor time of this process, which runs single-threaded: on a shared machine it moves less
// than wall time when other work competes for the cores.
double CpuSeconds() { return static_cast<double>(std::clock()) / CLOCKS_PER_SEC; }

struct Run {
  double seconds = 0;
  double cpu_seconds = 0;
  Plan plan;
};

void RunVariant(const Variant& v, const Options& opt) {
  const auto setup_start = std::chrono::steady_clock::now();
  ClusterShape cluster;
  cluster.nodes = v.nodes;
  cluster.seed = opt.seed;
  const ClusterSpec spec = MakeCluster(cluster);
  Result<ClusterState> created = ClusterState::Create(spec);
  if (!created.ok()) Fail("cluster: " + created.status().message());
  ClusterState& state = *created;
  // MakeJobs names GPU types by their index in cluster.models; the state interns them in order of
  // first appearance, which must be the same.
  for (GpuTypeId t = 0; t < cluster.models.size(); ++t) {
    if (state.FindGpuType(cluster.models[t].name) != t)
      Fail("GPU type ids differ from the model order");
  }

  WorkloadShape workload;
  workload.jobs = v.jobs;
  workload.seed = opt.seed + 1;
  const std::vector<Job> jobs = MakeJobs(workload, cluster.models);
  const double capacity_milli = static_cast<double>(state.device_count()) * kMilliPerGpu;
  std::printf(
      "# %s: %zu nodes, %zu GPUs, %zu pending jobs asking %.1f%% of the GPUs; setup %.2f s\n",
      v.name, state.node_count(), state.device_count(), jobs.size(),
      100.0 * static_cast<double>(TotalGpuDemand(jobs)) / capacity_milli,
      Seconds(std::chrono::steady_clock::now() - setup_start));

  EngineOptions options;
  if (opt.clock) {
    options.clock_micros = [] {
      return std::chrono::duration_cast<std::chrono::microseconds>(
                 std::chrono::steady_clock::now().time_since_epoch())
          .count();
    };
  }
  const Engine engine(options);

  const int reps = opt.reps > 0 ? opt.reps : v.reps;
  std::vector<Run> runs;
  for (int i = 0; i < reps; ++i) {
    Run run;
    const double cpu_start = CpuSeconds();
    const auto start = std::chrono::steady_clock::now();
    run.plan = engine.Schedule(state, jobs, workload.now);
    run.seconds = Seconds(std::chrono::steady_clock::now() - start);
    run.cpu_seconds = CpuSeconds() - cpu_start;
    std::printf("# %s rep %d: %.3f s (%.3f s CPU), %zu binds\n", v.name, i + 1, run.seconds,
                run.cpu_seconds, run.plan.binds.size());
    if (!runs.empty() && Fingerprint(run.plan) != Fingerprint(runs.front().plan))
      Fail("the same cycle gave a different plan");
    runs.push_back(std::move(run));
  }

  // Outside the timing: the state came back as it went in, and the plan applies cleanly.
  if (Status st = state.CheckInvariants(); !st.ok())
    Fail("state after the cycles: " + st.message());
  if (!state.running().empty()) Fail("the cycle left running jobs behind");
  const Plan& plan = runs.front().plan;
  if (plan.binds.size() + plan.unplaced.size() != jobs.size())
    Fail("the plan does not account for every job");
  if (Status st = state.Apply(plan, jobs); !st.ok()) Fail("applying the plan: " + st.message());
  if (Status st = state.CheckInvariants(); !st.ok())
    Fail("state after applying the plan: " + st.message());
  std::int64_t allocated = 0;
  for (QueueId q = 0; q < state.queue_count(); ++q) {
    if (state.queue(q).parent == kNone) allocated += state.usage(q, 0);
  }

  std::printf("# %s plan fingerprint %016llx\n", v.name,
              static_cast<unsigned long long>(Fingerprint(plan)));
  std::int64_t by_stage[4] = {}, never = 0;
  for (const Unplaced& u : plan.unplaced) {
    ++by_stage[static_cast<int>(u.reason.stage)];
    never += u.reason.verdict == Verdict::kNever;
  }
  std::printf(
      "# %s unplaced by stage: validate %lld, quota %lld, filter %lld, place %lld; can never fit "
      "%lld\n",
      v.name, static_cast<long long>(by_stage[0]), static_cast<long long>(by_stage[1]),
      static_cast<long long>(by_stage[2]), static_cast<long long>(by_stage[3]),
      static_cast<long long>(never));

  std::sort(runs.begin(), runs.end(),
            [](const Run& a, const Run& b) { return a.seconds < b.seconds; });
  const Run& median = runs[runs.size() / 2];
  const double binds = static_cast<double>(median.plan.binds.size());
  Print("cycle_placements_per_s", v.suffix, binds / median.seconds, "placements/s");
  Print("cycle_seconds", v.suffix, median.seconds, "s");
  Print("cycle_cpu_seconds", v.suffix, median.cpu_seconds, "s");
  Print("cycle_binds", v.suffix, binds, "jobs");
  Print("cycle_unplaced", v.suffix, static_cast<double>(median.plan.unplaced.size()), "jobs");
  Print("cycle_demand_pct", v.suffix,
        100.0 * static_cast<double>(TotalGpuDemand(jobs)) / capacity_milli, "%");
  Print("cycle_gpu_allocated_pct", v.suffix,
        100.0 * static_cast<double>(allocated) / capacity_milli, "%");
  for (const StageTiming& t : median.plan.timings) {
    Print(std::string("cycle_stage_") + StageName(t.stage) + "_seconds", v.suffix,
          static_cast<double>(t.micros) / 1e6, "s");
    Print(std::string("cycle_stage_") + StageName(t.stage) + "_calls", v.suffix,
          static_cast<double>(t.calls), "calls");
  }
  std::fflush(stdout);
}

Options ParseArgs(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) Fail(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--only") {
      opt.only = value();
    } else if (arg == "--reps") {
      opt.reps = std::atoi(value().c_str());
    } else if (arg == "--seed") {
      opt.seed = std::strtoull(value().c_str(), nullptr, 10);
    } else if (arg == "--no-clock") {
      opt.clock = false;
    } else if (arg == "--write-backlog-trace") {
      opt.trace = value();
    } else {
      Fail(
          "usage: arbiter_bench [--only "
          "10k|1k|100k|incremental|memory|preempt|sim|sim10k|sim1m|backlog[-fifo|-default|-"
          "fairshare]|fill|store|pg|server|ha|"
          "cli] "
          "[--reps N] "
          "[--seed N] "
          "[--no-clock] [--write-backlog-trace FILE]");
    }
  }
  return opt;
}

}  // namespace
}  // namespace arbiter::bench

int main(int argc, char** argv) {
  using namespace arbiter::bench;
  const Options opt = ParseArgs(argc, argv);
  if (!opt.trace.empty()) {
    WriteBacklogTrace(std::string(ARBITER_SOURCE_DIR) + "/data/traces/philly/philly_first2000.csv",
                      20'000, opt.seed, opt.trace);
    return 0;
  }
  if (opt.only.empty()) {
    // Every benchmark in a process of its own, as each would run alone: one leaves the next a
    // heap it fragmented (the memory benchmark's million jobs cost the 10k cycle a third of its
    // speed) and resident memory the next cannot measure from zero.
    char self[4096];
    const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) Fail("cannot find this program to run each benchmark in a process of its own");
    self[n] = '\0';
    std::string pass;
    for (int i = 1; i < argc; ++i) pass += std::string(" '") + argv[i] + "'";
    for (const char* name :
         {"memory", "10k", "1k", "100k", "incremental", "preempt", "sim10k", "sim", "sim1m",
          "backlog", "fill", "store", "pg", "server", "ha", "cli"}) {
      const std::string command = std::string("'") + self + "' --only " + name + pass;
      if (std::system(command.c_str()) != 0) Fail(std::string("the benchmark ") + name + " failed");
    }
    return 0;
  }
  bool ran = false;
  if (opt.only.empty() || opt.only == "memory") {
    RunMemoryBench(1'000'000, 10'000, opt.seed);
    ran = true;
  }
  for (const Variant& v : kVariants) {
    if (!opt.only.empty() && opt.only != v.name) continue;
    RunVariant(v, opt);
    ran = true;
  }
  if (opt.only.empty() || opt.only == "incremental") {
    RunIncrementalBench(10'000, 90, opt.reps > 0 ? opt.reps : 2000, opt.seed, "");
    ran = true;
  }
  if (opt.only.empty() || opt.only == "preempt") {
    RunPreemptBench(10'000, 100'000, opt.reps > 0 ? opt.reps : 200, opt.seed, "");
    ran = true;
  }
  const std::string philly =
      std::string(ARBITER_SOURCE_DIR) + "/data/traces/philly/philly_first2000.csv";
  if (opt.only.empty() || opt.only == "sim10k") {
    RunSimBench(philly, 10'000, 205, opt.seed, "10k");
    ran = true;
  }
  if (opt.only.empty() || opt.only == "sim") {
    RunSimBench(philly, 100'000, 2048, opt.seed, "100k");
    ran = true;
  }
  if (opt.only.empty() || opt.only == "sim1m") {
    RunSimBench(philly, 1'000'000, 20'480, opt.seed, "1m");
    ran = true;
  }
  if (opt.only.empty() || opt.only == "backlog") {
    RunBacklogBench(philly, 20'000, opt.seed);
    ran = true;
  }
  // One policy of the backlog benchmark alone (to profile it): backlog-fifo, -default, -fairshare.
  if (opt.only.rfind("backlog-", 0) == 0) {
    RunBacklogBench(philly, 20'000, opt.seed, opt.only.substr(8));
    ran = true;
  }
  if (opt.only.empty() || opt.only == "fill") {
    RunFillBench(std::string(ARBITER_SOURCE_DIR) + "/data/traces/openb", 42,
                 opt.reps > 0 ? opt.reps : 3);
    ran = true;
  }
  if (opt.only.empty() || opt.only == "store") {
    RunStoreBench();
    ran = true;
  }
  if (opt.only.empty() || opt.only == "pg") {
    // The million-job recovery only when asked for (it takes minutes to fill).
    const char* recovery = std::getenv("ARBITER_BENCH_PG_RECOVERY_JOBS");
    RunPgStoreBench(64, 3.0, recovery ? std::atoll(recovery) : 0);
    ran = true;
  }
  if (opt.only.empty() || opt.only == "ha") {
    RunHaBench();
    ran = true;
  }
  if (opt.only.empty() || opt.only == "server") {
    const char* clients = std::getenv("ARBITER_BENCH_CLIENTS");
    const char* recovery = std::getenv("ARBITER_BENCH_RECOVERY_JOBS");
    RunServerBench(clients ? std::atoi(clients) : 64, 3.0,
                   recovery ? std::atoll(recovery) : 100'000);
    ran = true;
  }
  if (opt.only.empty() || opt.only == "cli") {
    RunCliBench(3.0);
    ran = true;
  }
  if (opt.only == "server-recovery") {  // run by the server benchmark in a process of its own
    const char* dir = std::getenv("ARBITER_BENCH_RECOVERY_DIR");
    if (!dir) Fail("server-recovery needs ARBITER_BENCH_RECOVERY_DIR");
    RunServerRecovery(dir);
    ran = true;
  }
  if (!ran) Fail("no variant named " + opt.only);
  return 0;
}
