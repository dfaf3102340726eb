// dot-product: smallest dot product of free and requested (CPU, GPU) (the published score).
#include "core/engine/score/score.h"

namespace arbiter::engine {

std::int64_t DotProductScore(const NodeState& node, const TaskRequest& req, const NodeGpu& gpu) {
  const double dot = static_cast<double>(node.cpu_free.value()) / kMaxSpecCpu *
                         (static_cast<double>(req.cpu.value()) / kMaxSpecCpu) +
                     static_cast<double>(gpu.free) / kMaxSpecGpu *
                         (static_cast<double>(req.gpu.value()) / kMaxSpecGpu);
  return static_cast<std::int64_t>(static_cast<double>(kMaxScore) * (1.0 - dot / 2));
}

}  // namespace arbiter::engine
