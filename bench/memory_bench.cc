// The memory benchmark: resident memory (RSS, from /proc/self/statm) added by pending jobs and by
// the nodes of a cluster state, per job and per node.
#include "memory_bench.h"

#include <unistd.h>

#include <cstdio>
#include <vector>

#include "core/state/cluster_state.h"
#include "workload.h"

namespace arbiter::bench {
namespace {

// Resident bytes of this process; 0 where /proc is not there.
double ResidentBytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  long size = 0, resident = 0;
  const int n = std::fscanf(f, "%ld %ld", &size, &resident);
  std::fclose(f);
  return n == 2 ? static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) : 0;
}

}  // namespace

void RunMemoryBench(std::uint32_t jobs, std::uint32_t nodes, std::uint64_t seed) {
  ClusterShape cluster;
  cluster.nodes = nodes;
  cluster.seed = seed;
  const ClusterSpec spec = MakeCluster(cluster);
  const double before_state = ResidentBytes();
  Result<ClusterState> state = ClusterState::Create(spec);
  if (!state.ok()) Fail("cluster: " + state.status().message());
  const double state_bytes = ResidentBytes() - before_state;

  WorkloadShape workload;
  workload.jobs = jobs;
  workload.seed = seed + 1;
  const double before_jobs = ResidentBytes();
  std::vector<Job> pending = MakeJobs(workload, cluster.models);
  const double job_bytes = ResidentBytes() - before_jobs;
  if (before_jobs == 0) Fail("no /proc/self/statm to read resident memory from");
  std::printf("# memory: %zu pending jobs %.0f MiB, a state of %zu nodes %.1f MiB\n",
              pending.size(), job_bytes / (1 << 20), state->node_count(), state_bytes / (1 << 20));
  std::printf("BENCH pending_job_bytes %.6g bytes\n", job_bytes / static_cast<double>(jobs));
  std::printf("BENCH pending_1m_jobs_mib %.6g MiB\n",
              job_bytes / static_cast<double>(jobs) * 1e6 / (1 << 20));
  std::printf("BENCH node_bytes %.6g bytes\n", state_bytes / static_cast<double>(nodes));
  std::fflush(stdout);
}

}  // namespace arbiter::bench
