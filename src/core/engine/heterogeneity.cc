// Heterogeneity (OrderingWeights::heterogeneity): the GPU model each pending job is given first,
// shared out by comparative advantage as Gavel's maximum total throughput would.
#include <algorithm>

#include "core/engine/stages.h"

namespace arbiter::engine {

std::vector<GpuTypeId> PreferredModels(const ClusterState& state, std::span<const Job> pending,
                                       std::span<const std::uint32_t> order) {
  std::vector<GpuTypeId> preferred(pending.size(), kNone);
  const auto types = static_cast<GpuTypeId>(state.gpu_type_count());
  if (!state.has_throughput() || types < 2) return preferred;
  // Every (job, model) the job accepts, valued by its normalised throughput there: how much more
  // (or less) the model gives this job than an equal share of the cluster would.
  struct Pair {
    double value;
    std::uint32_t rank;  // in the order
    GpuTypeId type;
  };
  std::vector<Pair> pairs;
  for (std::uint32_t rank = 0; rank < order.size(); ++rank) {
    const Job& job = pending[order[rank]];
    if (job.total_gpu().value() <= 0 || !state.HasThroughputRow(job)) continue;
    preferred[order[rank]] = kNoModelLeft;
    for (GpuTypeId t = 0; t < types; ++t) {
      if (job.gpu_types.Accepts(t)) pairs.push_back({state.NormalizedThroughput(job, t), rank, t});
    }
  }
  std::sort(pairs.begin(), pairs.end(), [](const Pair& a, const Pair& b) {
    if (a.value != b.value) return a.value > b.value;
    if (a.rank != b.rank) return a.rank < b.rank;
    return a.type < b.type;
  });
  // The most valued pairs first, while the model has GPUs for the job (the earlier in the order
  // first among equal values).
  std::vector<std::int64_t> supply(types);
  for (GpuTypeId t = 0; t < types; ++t) supply[t] = state.TypeDevices(t) * kMilliPerGpu;
  for (const Pair& p : pairs) {
    const std::uint32_t i = order[p.rank];
    const std::int64_t milli = pending[i].total_gpu().value();
    if (preferred[i] != kNoModelLeft || supply[p.type] < milli) continue;
    supply[p.type] -= milli;
    preferred[i] = p.type;
  }
  return preferred;
}

}  // namespace arbiter::engine
