// The incremental-decision benchmark: a cluster 90% full, one arriving job, the time from the call
// to Engine::Schedule to its plan (the placement, or the reason it waits). This is the latency a
// server adds to a submission when it schedules on arrival.
#include "incremental_bench.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "arbiter/engine.h"
#include "core/state/cluster_state.h"
#include "workload.h"

namespace arbiter::bench {

void RunIncrementalBench(std::uint32_t nodes, double fill_pct, int arrivals, std::uint64_t seed,
                         const char* suffix) {
  ClusterShape cluster;
  cluster.nodes = nodes;
  cluster.seed = seed;
  Cluster built = BuildCluster(cluster);
  ClusterState& state = built.state();
  const double capacity = static_cast<double>(state.device_count()) * kMilliPerGpu;

  // Fill: one cycle of a large workload, then its binds in order up to the target.
  WorkloadShape workload;
  workload.jobs = nodes * 10;
  workload.seed = seed + 1;
  const std::vector<Job> fill = MakeJobs(workload, cluster.models);
  const Engine engine;
  const Plan plan = engine.Schedule(state, fill, workload.now);
  double allocated = 0;
  for (const Bind& b : plan.binds) {
    if (allocated >= fill_pct / 100 * capacity) break;
    if (Status st = state.Bind(fill[b.pending_index], b.allocation, workload.now); !st.ok())
      Fail("fill: " + st.message());
    allocated += static_cast<double>(fill[b.pending_index].total_gpu().value());
  }

  // Arrivals: jobs of the same mix with ids after the fill's.
  WorkloadShape more = workload;
  more.jobs = static_cast<std::uint32_t>(arrivals);
  more.seed = seed + 3;
  std::vector<Job> arriving = MakeJobs(more, cluster.models);
  for (std::size_t i = 0; i < arriving.size(); ++i)
    arriving[i].id = static_cast<JobId>(fill.size() + 1 + i);
  std::vector<double> micros, placed_micros;
  std::size_t placed = 0;
  EngineOptions timed;
  timed.clock_micros = [] {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  };
  const Engine timing(timed);
  std::vector<std::int64_t> stage_micros;
  std::vector<std::string> stage_names;
  std::vector<Job> one(1);
  for (const Job& job : arriving) {
    one[0] = job;
    const auto start = std::chrono::steady_clock::now();
    const Plan p = timing.Schedule(state, one, workload.now);
    for (std::size_t k = 0; k < p.timings.size(); ++k) {
      if (stage_micros.size() <= k) {
        stage_micros.push_back(0);
        stage_names.push_back(StageName(p.timings[k].stage));
      }
      stage_micros[k] += p.timings[k].micros;
    }
    micros.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
            .count());
    placed += p.binds.size();
    if (!p.binds.empty() && p.evictions.empty()) placed_micros.push_back(micros.back());
  }
  {
    const std::vector<Job> none;
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < 100; ++i) (void)engine.Schedule(state, none, workload.now);
    std::printf(
        "# incremental: a cycle with nothing pending takes %.1f us; %zu running task shapes\n",
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
                .count() /
            100,
        state.running_task_shapes().size());
  }
  if (Status st = state.CheckInvariants(); !st.ok()) Fail("state: " + st.message());
  std::printf("# incremental: %zu nodes %.1f%% allocated, %zu running jobs, %d arrivals\n",
              state.node_count(), 100 * allocated / capacity, state.running().size(), arrivals);
  for (std::size_t k = 0; k < stage_micros.size(); ++k)
    std::printf("# incremental stage %s: %.1f us per arrival\n", stage_names[k].c_str(),
                static_cast<double>(stage_micros[k]) / arrivals);
  std::printf("BENCH incremental_p50_us%s %.6g us\n", suffix, Percentile(placed_micros, 0.50));
  std::printf("BENCH incremental_p99_us%s %.6g us\n", suffix, Percentile(placed_micros, 0.99));
  std::printf("BENCH incremental_any_p50_us%s %.6g us\n", suffix, Percentile(micros, 0.50));
  std::printf("BENCH incremental_any_p99_us%s %.6g us\n", suffix, Percentile(micros, 0.99));
  std::printf("BENCH incremental_placed_pct%s %.6g %%\n", suffix,
              100.0 * static_cast<double>(placed) / static_cast<double>(arrivals));
  std::fflush(stdout);
}

}  // namespace arbiter::bench
