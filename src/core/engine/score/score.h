// The placement policies' scores: one file per policy in this folder, and what they share. How a
// policy scores one node for one task, and which devices of it the task gets (NodeScorer,
// stages.h, dispatches to them):
//   arbiter (the default), frag, fgd: fragmentation.cc, with the model of frag_model.cc;
//   random.cc, best_fit.cc, packing.cc, dot_product.cc, clustering.cc: the baselines.
// The baselines and FGD follow the published simulator of Weng et al., "Beware of Fragmentation"
// (ATC 2023): integer scores in [0, 100] (negated by NodeScorer: smaller is better), equal scores
// going to the first node of a seeded order, so that Arbiter's numbers for them compare with the
// published ones (docs/placement.md). To add a policy: a value of PlacementPolicy (engine.h) with
// its name (common.cc), a file here, and its case in NodeScorer::Score (node_scorer.cc).
#pragma once

#include <cstdint>
#include <vector>

#include "core/engine/stages.h"

namespace arbiter::engine {

// The published simulator normalises by the largest node it knows: 128 cores, 8 GPUs.
inline constexpr double kMaxSpecCpu = 128000;
inline constexpr double kMaxSpecGpu = 8000;
inline constexpr std::int64_t kMaxScore = 100;

inline std::uint64_t Mix(std::uint64_t x) {  // SplitMix64's finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

inline bool Usable(const DeviceState& dev, const TaskRequest& req, GpuTypeId type) {
  return dev.type == type && dev.memory >= req.gpu_memory;
}

// Free milli-GPU of the task's type on the node (every device for a task without GPUs), and the
// node's devices of that type.
struct NodeGpu {
  std::int64_t free = 0;
  std::int64_t devices = 0;
  std::int64_t whole_free = 0;
};
NodeGpu CountGpu(const NodeState& node, GpuTypeId type);

// A share: the device with the least free share that holds it (a whole free device counts with
// 1000), the first such in index order ("best" GPU selection of the published simulator).
std::uint32_t BestShareDevice(const NodeState& node, const TaskRequest& req, GpuTypeId type);

// Whole devices: the first free ones in index order, inside one NVLink group when one holds them
// (the group with the fewest free devices that does), else, when allowed, across groups.
bool WholeDevices(const NodeState& node, const TaskRequest& req, GpuTypeId type, bool allow_span,
                  std::vector<DeviceShare>& out);

// ---- random.cc ----
// A share on a device drawn uniformly (by hash) among those that hold it.
std::uint32_t RandomShareDevice(const NodeState& node, const TaskRequest& req, GpuTypeId type,
                                std::uint64_t tie);
// A uniform draw per job and node (smaller is better): a uniform node.
double RandomScore(std::uint64_t seed, JobId job, NodeId n);

// ---- The published scores, higher is better, in [0, 100] ----
// best_fit.cc: least leftover after placement, 0.5 CPU / 128 cores + 0.5 GPU / 8 GPUs.
std::int64_t BestFitScore(const NodeState& node, const TaskRequest& req, const NodeGpu& gpu);
// dot_product.cc: smallest dot product of free and requested (CPU, GPU), normalised by the max.
std::int64_t DotProductScore(const NodeState& node, const TaskRequest& req, const NodeGpu& gpu);
// packing.cc: partly used GPUs first, then partly used nodes, then the fewest free GPUs.
std::int64_t PackingScore(const NodeState& node, const TaskRequest& req, GpuTypeId type,
                          const NodeGpu& gpu);
// clustering.cc: nodes already hosting tasks of the same GPU-request class first.
std::int64_t ClusteringScore(const NodeState& node, const TaskRequest& req, const NodeGpu& gpu);

// ---- fragmentation.cc (arbiter, frag, fgd) ----
// The score of a growth of expected fragmentation (milli-GPU; smaller is better).
double FragRank(PlacementPolicy policy, double growth);

}  // namespace arbiter::engine
