// The fill experiment of Weng et al., "Beware of Fragmentation" (USENIX ATC 2023), on Arbiter's
// engine: a cluster from an openb node list is filled by pods that arrive one at a time and never
// leave, and the GPU allocation ratio is read as the arrived GPU request grows. See
// docs/placement.md for the method and the published numbers it reproduces.
//
// Per seed: every pod of the list, shuffled, then pods drawn uniformly at random from the list and
// appended until one more would take the total GPU request past `inflate` x the cluster's GPU
// capacity (the published simulator's "workload tuning"). Each pod is scheduled by one
// Engine::Schedule cycle (preemption and backfill off) and bound when placed; a pod that fits
// nowhere fails and is skipped. After each pod the allocation ratio (allocated / total milli-GPU)
// is recorded against the arrived GPU request in % of capacity, rounded to a whole percent; the
// figure at X% is the mean of the ratios recorded at X% (at X +- 1% when the sequence skips X),
// which is how the published analysis reads it. Results are means over the seeds.
//
// Standard library only; the caller reads the files (trace.h's readers).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "arbiter/engine.h"
#include "arbiter/model.h"
#include "arbiter/status.h"
#include "trace/trace.h"

namespace arbiter::fill {

// One pod of the list: a gang of `tasks` identical tasks (openb pods have one).
struct Pod {
  std::string name;
  std::int32_t tasks = 1;
  std::int64_t gpu = 0;             // milli-GPU per task
  std::int64_t cpu = 0;             // milli-cores per task
  std::int64_t memory = 0;          // MiB per task
  std::vector<std::string> models;  // acceptable GPU models; empty: any
  std::int64_t total_gpu() const { return gpu * tasks; }
};

// The cluster of a node list: each node its GPUs of its model (one NVLink group), its CPU and
// memory; one queue, one priority class, no topology levels.
ClusterSpec MakeCluster(std::span<const trace::TraceNode> nodes);
std::vector<Pod> PodsFromTrace(std::span<const trace::TraceJob> jobs);

// A workload derived from a pod list, like the published experiment's variants of openb's list:
// a share of the GPU pods (each with probability percent / 100, drawn from `seed`)
// - kGpuSpec ("gpuspec=P"): constrained to one GPU model, that of a GPU drawn uniformly among those
//   of the nodes that could host the pod (enough GPUs of the model, CPU and memory);
// - kMultiGpu ("multigpu=P"): replaced by a pod drawn uniformly from the list's multi-GPU pods;
// - kGpuShare ("gpushare=P"): replaced by a pod drawn uniformly from the list's pods that ask a
//   fraction of one GPU.
struct Variant {
  enum class Kind { kGpuSpec, kMultiGpu, kGpuShare };
  Kind kind = Kind::kGpuSpec;
  int percent = 0;
  std::uint64_t seed = 1;
};
// "gpuspec=33", "multigpu=50", "gpushare=100"; an error names what is wrong.
Result<Variant> ParseVariant(std::string_view text);
std::string VariantName(const Variant& variant);
Result<std::vector<Pod>> MakeVariant(std::span<const Pod> pods,
                                     std::span<const trace::TraceNode> nodes,
                                     const Variant& variant);
// A mix: the variants applied in order, the k-th (from 0) drawing from its seed + k. Variants of
// one seed draw the same numbers, so the second would take the very pods the first took
// ("multigpu=30" then "gpuspec=30" would constrain exactly the multi-GPU pods, and
// "gpushare=80" would replace every pod "multigpu=50" made multi-GPU).
Result<std::vector<Pod>> MakeVariants(std::span<const Pod> pods,
                                      std::span<const trace::TraceNode> nodes,
                                      std::span<const Variant> chain);

struct FillOptions {
  std::vector<PlacementPolicy> policies{std::begin(kAllPlacementPolicies),
                                        std::end(kAllPlacementPolicies)};
  int seeds = 10;
  std::uint64_t first_seed = 42;  // seeds first_seed, first_seed + 1, ...
  double inflate = 1.3;           // total GPU request of the workload / cluster GPU capacity
  int step_pct = 10;              // report every step_pct % of arrived GPU request
  int threads = 1;                // runs (policy x seed) in parallel
};
// The options from what a user gives (`arbiter fill`, the Python module's fill): policy names
// (none: every policy), seeds (at least 1), the first seed, the inflation ratio (above 0, at most
// 100), threads (0 or less: one per processor). An error names its field: "policies", "seeds" or
// "inflate".
Result<FillOptions> MakeFillOptions(std::span<const std::string> policies, int seeds,
                                    std::uint64_t first_seed, double inflate, int threads);

// One run: one policy, one seed.
struct RunResult {
  std::vector<double> alloc_pct;  // per reported step (FillReport::steps); NaN when not reached
  std::int64_t pods = 0;          // pods that arrived
  std::int64_t failed_pods = 0;   // pods that fit nowhere
  double frag_pct = 0;            // fragmentation (FragmentedMilli) at 100% arrived, % of capacity
  double seconds = 0;             // wall time of the scheduling loop
};

struct PolicyResult {
  PlacementPolicy policy = PlacementPolicy::kArbiter;
  std::vector<double> alloc_pct;  // mean over seeds, per step
  double failed_pods = 0;         // mean over seeds
  double frag_pct = 0;            // mean over seeds
  double seconds = 0;             // mean wall time of one run
  std::vector<RunResult> runs;    // per seed
};

struct FillReport {
  std::size_t nodes = 0;
  std::int64_t gpus = 0;
  std::size_t listed_pods = 0;
  std::vector<int> steps;  // arrived GPU request, % of capacity: 10, 20, ...
  std::vector<PolicyResult> policies;
};

// The free milli-GPU of the cluster that no task shape of `pods` could use now: on each node, the
// free share of every device that no shape (of an accepted model, with the CPU and memory the node
// has free, and, for k whole GPUs, with k free devices on the node) could take.
std::int64_t FragmentedMilli(const ClusterState& state, std::span<const Pod> pods);

// The task shapes of a pod list with their frequencies, for PlacementPolicy::kFrag.
std::vector<TaskShape> ShapesOf(const ClusterState& state, std::span<const Pod> pods);

// The cluster as a run of `seed` sees it: its nodes in a random order drawn from the seed (apart
// from the arrivals' draws). The published simulator names the nodes after a seeded permutation
// and takes, among equal scores, the node of the smallest name; the default policy takes, among
// equal scores, the first node of the cluster's order, so each seed draws that order too.
ClusterSpec InSeededOrder(const ClusterSpec& spec, std::uint64_t seed);

// One run of one policy and seed on a fresh state of InSeededOrder(spec, seed).
Result<RunResult> RunOnce(const ClusterSpec& spec, std::span<const Pod> pods,
                          PlacementPolicy policy, std::uint64_t seed, double inflate,
                          std::span<const int> steps);

// Every policy of `options` over every seed. `progress`, when given, is called after each run
// (from the thread that ran it, one at a time).
Result<FillReport> RunFill(std::span<const trace::TraceNode> nodes, std::span<const Pod> pods,
                           const FillOptions& options,
                           const std::function<void(PlacementPolicy, std::uint64_t seed,
                                                    const RunResult&)>& progress = {});

// {"policies": {"<name>": {"alloc_pct": {"10": x, ..., "130": x}, "failed_pods": n}}}
std::string ToJson(const FillReport& report);

}  // namespace arbiter::fill
