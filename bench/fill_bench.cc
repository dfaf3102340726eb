// The fill benchmark: the time of one seeded run of "Beware of Fragmentation"'s experiment on the
// full openb lists (1,213 nodes, 6,212 GPUs; 8,152 pods inflated to 130% of the GPUs, about
// 10,600 arrivals, each one Engine::Schedule cycle), with the engine's default placement.
#include "fill_bench.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "sim/fill.h"
#include "trace/trace.h"
#include "workload.h"

namespace arbiter::bench {

void RunFillBench(const std::string& dir, std::uint64_t seed, int reps) {
  Result<std::vector<trace::TraceNode>> nodes =
      trace::ReadOpenbNodesFile(dir + "/openb_node_list_gpu_node.csv");
  if (!nodes.ok()) Fail(nodes.status().message());
  Result<trace::Trace> trace = trace::ReadTraceFile(dir + "/openb_pod_list_default.csv", "openb");
  if (!trace.ok()) Fail(trace.status().message());
  if (!trace->bad_rows.empty()) Fail("openb pod list: bad rows");
  const std::vector<fill::Pod> pods = fill::PodsFromTrace(trace->jobs);
  const ClusterSpec spec = fill::MakeCluster(*nodes);
  const int steps[] = {100};
  std::vector<fill::RunResult> runs;
  for (int r = 0; r < std::max(1, reps); ++r) {
    // The whole run: the cluster state, the arrival order, the scheduling loop, the measures.
    const auto start = std::chrono::steady_clock::now();
    Result<fill::RunResult> run =
        fill::RunOnce(spec, pods, PlacementPolicy::kArbiter, seed, 1.3, steps);
    if (!run.ok()) Fail("fill: " + run.status().message());
    const double loop = run->seconds;
    run->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf(
        "# fill rep %d: %.3f s (scheduling loop %.3f s), %lld pods, %lld failed, %.2f%% "
        "allocated at 100%%\n",
        r + 1, run->seconds, loop, static_cast<long long>(run->pods),
        static_cast<long long>(run->failed_pods), run->alloc_pct[0]);
    if (!runs.empty() && (run->failed_pods != runs.front().failed_pods ||
                          run->alloc_pct[0] != runs.front().alloc_pct[0]))
      Fail("fill: the same seed gave a different run");
    runs.push_back(*run);
  }
  std::sort(runs.begin(), runs.end(), [](const fill::RunResult& a, const fill::RunResult& b) {
    return a.seconds < b.seconds;
  });
  const fill::RunResult& median = runs[runs.size() / 2];
  std::printf("BENCH fill_seed_s %.6g s\n", median.seconds);
  std::printf("BENCH fill_pods_per_s %.6g pods/s\n",
              static_cast<double>(median.pods) / median.seconds);
  std::printf("BENCH fill_alloc_100_pct %.6g %%\n", median.alloc_pct[0]);
  std::fflush(stdout);
}

}  // namespace arbiter::bench
