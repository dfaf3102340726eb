// What the load generator asks of the server: the cluster file it starts a server with (nodes
// that its simulated agents register as), and the jobs it submits, drawn like the benchmarks'
// mix (bench/workload.h) from an explicit seed.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "../workload.h"

namespace arbiter::loadgen {

// The simulated cluster: `nodes` nodes named node-0, node-1, ..., each with `gpus_per_node` H800
// of 80 GiB in one NVLink group, 128 cores and 2 TiB; 32 nodes per leaf, 16 leaves per spine.
struct ClusterShape {
  std::uint32_t nodes = 10'000;
  std::uint32_t gpus_per_node = 8;
};

inline constexpr const char* kGpuModel = "H800";
inline constexpr std::int64_t kGpuMemoryMiB = 80 * 1024;
inline constexpr std::int64_t kNodeCpuMilli = 128'000;
inline constexpr std::int64_t kNodeMemoryMiB = 2LL * 1024 * 1024;

// The node's name, as the cluster file's template `node-{i}` expands it.
std::string NodeName(std::uint32_t index);

// The bearer tokens of the server the load generator starts (its file has them inline, so the
// server runs with --dev), or of the server it is pointed at.
struct Tokens {
  std::string agent;                  // join token (role agent, any node)
  std::string user;                   // submits to every leaf queue
  std::string admin;                  // not used by the load; for a person looking on (--keep)
  std::vector<std::string> watchers;  // users that watch the event stream; empty: `user`
};

// Tokens for a server the load generator writes the configuration of: one watcher token per
// `watchers_per_token` watchers (the thread-per-connection server let one token hold 4 event
// streams at once).
Tokens MakeTokens(std::uint32_t watchers, std::uint32_t watchers_per_token);

// The cluster file (docs/configuration.md): topology spine > leaf, priority classes P0 (1000,
// not preemptible), P1 (500), P2 (100), queues org > {train, infer, batch} with nominal GPU quota
// 50/20/30 % of the cluster and unlimited borrowing (as bench/workload.h's MakeCluster), the
// tokens, and server limits that never refuse the load (no per-user job or GPU limit).
std::string ClusterYaml(const ClusterShape& shape, const Tokens& tokens);

// Seeded draws: the benchmarks' own (bench/workload.h), so a seed names the same draws.
using Rng = bench::Rng;

// How long the simulated tasks run and how often they checkpoint, drawn per job.
struct JobTimes {
  std::int64_t min_runtime_ms = 20'000;
  std::int64_t max_runtime_ms = 120'000;
  std::int64_t min_checkpoint_ms = 15'000;
  std::int64_t max_checkpoint_ms = 45'000;
};

// One POST /v1/jobs body of the benchmarks' mix (shares of jobs): 30 % fractional (one task of
// 100..900 milli-GPU), 45 % one GPU, 10 % 2..4 GPUs, 8 % a node's GPUs (one task, or one task of
// 1 GPU per device), 5 % gangs of 2..8 whole nodes kept in one leaf (required or preferred), 2 %
// CPU only; priority classes P0/P1/P2 10/30/60 %. Each job runs `sleep` for its runtime (for real
// agents); the simulated agents read LOADGEN_RUNTIME_MS and LOADGEN_CHECKPOINT_MS from its env.
// `runtime_estimate_ms` is the runtime and `checkpoint_interval_ms` the checkpoint interval.
std::string JobBody(Rng& rng, std::uint64_t index, const ClusterShape& shape,
                    const JobTimes& times);

}  // namespace arbiter::loadgen
