// best-fit: least leftover after placement (the published score).
#include "core/engine/score/score.h"

namespace arbiter::engine {

std::int64_t BestFitScore(const NodeState& node, const TaskRequest& req, const NodeGpu& gpu) {
  double score = 0;
  score += static_cast<double>(node.cpu_free.value() - req.cpu.value()) / kMaxSpecCpu * 0.5;
  score += static_cast<double>(gpu.free - req.gpu.value()) / kMaxSpecGpu * 0.5;
  return static_cast<std::int64_t>((1.0 - score) * static_cast<double>(kMaxScore));
}

}  // namespace arbiter::engine
