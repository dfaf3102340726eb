// clustering: nodes already hosting tasks of the same GPU-request class first (the published
// score).
#include "core/engine/score/score.h"

namespace arbiter::engine {

namespace {

// The GPU-request class of a task: 0 none, 1 a share, 1 + k for k whole GPUs.
std::int64_t RequestClass(const TaskRequest& req) {
  if (req.gpu.value() == 0) return 0;
  return req.shared() ? 1 : 1 + req.whole_gpus();
}

}  // namespace

// Nodes already running tasks of the same class first (only that class: best), then nodes without
// GPU tasks, then the others; within each band, the fuller node first.
std::int64_t ClusteringScore(const NodeState& node, const TaskRequest& req, const NodeGpu& gpu) {
  const std::int64_t cls = RequestClass(req);
  if (cls == 0) return 0;
  bool same = false, other = false;
  for (const Resident& r : node.residents) {
    for (const TaskGroup& g : r.job->job.groups) {
      const std::int64_t c = RequestClass(g.request);
      if (c == 0) continue;
      same = same || c == cls;
      other = other || c != cls;
    }
  }
  const std::int64_t fill = kMaxScore / 4 * (static_cast<std::int64_t>(kMaxSpecGpu) - gpu.free) /
                            static_cast<std::int64_t>(kMaxSpecGpu);
  if (same) return fill + (other ? kMaxScore * 2 / 4 : kMaxScore * 3 / 4);
  return fill + (other ? 0 : kMaxScore / 4);
}

}  // namespace arbiter::engine
