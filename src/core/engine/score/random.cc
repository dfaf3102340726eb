// random: a uniformly random feasible node (and, for a share, device).
#include "core/engine/score/score.h"

namespace arbiter::engine {

std::uint32_t RandomShareDevice(const NodeState& node, const TaskRequest& req, GpuTypeId type,
                                std::uint64_t tie) {
  std::uint32_t best = kNone;
  std::uint64_t best_hash = 0;
  for (std::uint32_t d = 0; d < node.devices.size(); ++d) {
    const DeviceState& dev = node.devices[d];
    if (!Usable(dev, req, type) || dev.free < req.gpu || dev.memory_free < req.gpu_memory) continue;
    const std::uint64_t h = Mix(tie ^ Mix(d + 0x51ed2701ull));
    if (best == kNone || h < best_hash) {
      best = d;
      best_hash = h;
    }
  }
  return best;
}

double RandomScore(std::uint64_t seed, JobId job, NodeId n) {
  return static_cast<double>(RandomDraw(seed, job, n) >> 11);
}

}  // namespace arbiter::engine
