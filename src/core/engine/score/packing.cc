// packing: partly used GPUs first, then partly used nodes, then free nodes (the published score).
#include <algorithm>
#include <vector>

#include "core/engine/score/score.h"

namespace arbiter::engine {

// Partly used GPUs first (the fuller the better), then free GPUs of partly used nodes, then free
// nodes (the fewer their GPUs the better).
std::int64_t PackingScore(const NodeState& node, const TaskRequest& req, GpuTypeId type,
                          const NodeGpu& gpu) {
  if (req.gpu.value() == 0) return 0;
  if (gpu.whole_free == gpu.devices) {
    return std::max<std::int64_t>(kMaxScore / 3 - gpu.whole_free, gpu.whole_free);
  }
  // The devices the task would use, least free first: used ones when they hold it.
  const std::int64_t per_device = req.shared() ? req.gpu.value() : kMilliPerGpu;
  std::int64_t need = req.shared() ? 1 : req.whole_gpus();
  std::vector<std::int64_t> frees;
  for (const DeviceState& dev : node.devices) {
    if (Usable(dev, req, type)) frees.push_back(dev.free.value());
  }
  std::stable_sort(frees.begin(), frees.end());
  std::int64_t whole_used = 0, used_free_pct = 0;
  for (std::int64_t f : frees) {
    if (need == 0) break;
    if (f < per_device) continue;
    --need;
    if (f == kMilliPerGpu) {
      ++whole_used;
    } else {
      used_free_pct += f * 100 / kMilliPerGpu;
    }
  }
  if (whole_used > 0) return std::max<std::int64_t>(kMaxScore / 2 - whole_used, kMaxScore / 3);
  return std::max<std::int64_t>(kMaxScore - used_free_pct / 10, kMaxScore / 2);
}

}  // namespace arbiter::engine
