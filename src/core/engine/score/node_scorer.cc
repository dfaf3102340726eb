// NodeScorer: a node scored for one task under the options' policy, by the policy's file.
#include "core/engine/score/score.h"

namespace arbiter::engine {

NodeScorer::NodeScorer(const ClusterState& state, const Job& job, const TaskRequest& req,
                       GpuTypeId type, const PlacementOptions& options, const FragModel* model)
    : state_(state), job_(job), req_(req), type_(type), options_(options) {
  if (options.policy == PlacementPolicy::kArbiter || options.policy == PlacementPolicy::kFrag ||
      options.policy == PlacementPolicy::kFgd)
    frag_ = model;
  if (frag_ && options.policy != PlacementPolicy::kFgd && type != kNone)
    type_cost_ = frag_->TypeCost(job.gpu_types, type) * static_cast<double>(req.gpu.value());
  request_ = {req.gpu.value(), req.cpu.value(), req.gpu_memory.value(), type, options.policy,
              false,           type_cost_};
}

bool NodeScorer::Score(NodeId n, bool allow_span, std::vector<DeviceShare>& devices,
                       double& score) {
  devices.clear();
  score = 0;
  const NodeState& node = state_.node(n);
  if (frag_) return ScoreFrag(n, node, allow_span, devices, score);
  // Devices.
  if (req_.gpu.value() > 0) {
    if (req_.shared()) {
      const std::uint32_t d =
          options_.policy == PlacementPolicy::kRandom
              ? RandomShareDevice(node, req_, type_, RandomDraw(options_.seed, job_.id, ~n))
              : BestShareDevice(node, req_, type_);
      if (d == kNone) return false;
      devices.push_back({d, req_.gpu, req_.gpu_memory});
    } else if (!WholeDevices(node, req_, type_, allow_span, devices)) {
      return false;
    }
  }
  const NodeGpu gpu = CountGpu(node, req_.gpu.value() > 0 ? type_ : kNone);
  std::int64_t published = 0;
  switch (options_.policy) {
    case PlacementPolicy::kRandom:
      score = RandomScore(options_.seed, job_.id, n);
      return true;
    case PlacementPolicy::kArbiter:
    case PlacementPolicy::kFrag:
    case PlacementPolicy::kFgd:
      break;
    case PlacementPolicy::kBestFit:
      published = BestFitScore(node, req_, gpu);
      break;
    case PlacementPolicy::kPacking:
      published = PackingScore(node, req_, type_, gpu);
      break;
    case PlacementPolicy::kDotProduct:
      published = DotProductScore(node, req_, gpu);
      break;
    case PlacementPolicy::kClustering:
      published = ClusteringScore(node, req_, gpu);
      break;
  }
  score = -static_cast<double>(published);
  return true;
}

}  // namespace arbiter::engine
