// The preemption benchmark: a full cluster (the cycle benchmark's 10,000 nodes x 8 GPUs, filled by
// one cycle of its workload, every job running for a day and checkpointed at random), then one
// 8-GPU high-priority arrival with a topology constraint. Measures the time to choose victims (the
// engine's preempt stage) and the whole cycle around it, over many arrivals (one at a time, on the
// same full cluster: the engine restores the state after each cycle).
#include "preempt_bench.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "arbiter/engine.h"
#include "core/state/cluster_state.h"
#include "workload.h"

namespace arbiter::bench {
namespace {

std::int64_t NowMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

void RunPreemptBench(std::uint32_t nodes, std::uint32_t jobs, int arrivals, std::uint64_t seed,
                     const char* suffix) {
  ClusterShape cluster;
  cluster.nodes = nodes;
  cluster.seed = seed;
  Cluster built = BuildCluster(cluster);
  ClusterState& state = built.state();

  WorkloadShape workload;
  workload.jobs = jobs;
  workload.seed = seed + 1;
  const std::vector<Job> fill = MakeJobs(workload, cluster.models);
  const Millis start = workload.now;
  Engine filler;
  Plan plan = filler.Schedule(state, fill, start);
  plan.evictions.clear();
  if (Status st = state.Apply(plan, fill); !st.ok()) Fail("fill: " + st.message());
  // Every job has run for a day; each checkpointed at a random time since it started.
  const Millis now = start + 24 * 3600 * kMillisPerSecond;
  Rng rng(seed + 2);
  for (const Bind& b : plan.binds) {
    (void)state.RecordCheckpoint(
        b.job, start + static_cast<Millis>(rng.Below(24 * 3600 * kMillisPerSecond)));
  }

  EngineOptions options;
  options.clock_micros = NowMicros;
  Engine engine(options);
  std::vector<double> preempt_us, cycle_us, backfill_us, explain_us;
  std::size_t victims = 0, placed = 0;
  for (int i = 0; i < arrivals; ++i) {
    Job job;
    job.id = 10'000'000 + static_cast<JobId>(i);
    job.name = "arrival";
    job.priority_class = 0;  // P0
    job.queue = static_cast<QueueId>(1 + i % 3);
    job.submit_time = now;
    job.gpu_types = GpuTypeSet::Of(static_cast<GpuTypeId>(i % cluster.models.size()));
    TaskGroup g;
    g.name = "main";
    // Alternate one 8-GPU task inside one NVLink group and 8 one-GPU tasks on one node.
    const bool nvlink = i % 2 == 0;
    g.count = nvlink ? 1 : 8;
    g.request.gpu = MilliGpu(nvlink ? 8000 : 1000);
    g.request.cpu = MilliCpu(nvlink ? 16000 : 2000);
    g.request.memory = MemMiB(nvlink ? 128 * kGiB : 16 * kGiB);
    job.groups.push_back(g);
    job.topology = {nvlink ? state.topology().nvlink_level() : state.topology().node_level(),
                    ConstraintMode::kRequired};
    const std::vector<Job> pending = {job};
    const auto t0 = std::chrono::steady_clock::now();
    Plan p = engine.Schedule(state, pending, now);
    cycle_us.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    for (const StageTiming& t : p.timings) {
      if (t.stage == Stage::kPreempt) preempt_us.push_back(static_cast<double>(t.micros));
      if (t.stage == Stage::kBackfill) backfill_us.push_back(static_cast<double>(t.micros));
      if (t.stage == Stage::kExplain) explain_us.push_back(static_cast<double>(t.micros));
    }
    victims += p.evictions.size();
    placed += p.binds.size();
  }
  if (Status st = state.CheckInvariants(); !st.ok()) Fail("invariants: " + st.message());
  std::printf(
      "# preempt%s: %u nodes, %zu running jobs, %.1f%% of GPUs allocated; %d arrivals, %zu placed "
      "by preemption, %.1f victims each\n",
      suffix, nodes, state.running().size(),
      100.0 * static_cast<double>(state.usage(0, 0)) /
          (static_cast<double>(state.device_count()) * kMilliPerGpu),
      arrivals, placed, placed ? static_cast<double>(victims) / static_cast<double>(placed) : 0.0);
  auto print = [&](const char* name, double v, const char* unit) {
    std::printf("BENCH %s%s %g %s\n", name, suffix, v, unit);
  };
  print("preempt_p50_us", Percentile(preempt_us, 0.50), "us");
  print("preempt_p99_us", Percentile(preempt_us, 0.99), "us");
  print("preempt_cycle_p99_us", Percentile(cycle_us, 0.99), "us");
  print("preempt_cycle_backfill_p99_us", Percentile(backfill_us, 0.99), "us");
  print("preempt_cycle_explain_p99_us", Percentile(explain_us, 0.99), "us");
  print("preempt_placed_pct", 100.0 * static_cast<double>(placed) / arrivals, "%");
  std::fflush(stdout);
}

}  // namespace arbiter::bench
