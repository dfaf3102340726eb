// arbiter (the default), frag, fgd: nodes scored by the growth of their expected fragmentation
// under the model (frag_model.cc); the default scores only the candidates place.cc draws from the
// indexes.
#include <bit>
#include <cmath>

#include "core/engine/score/score.h"

namespace arbiter::engine {

// The score of a growth of expected fragmentation (milli-GPU; smaller is better). FGD: its
// published score, the integer part of 100 x sigmoid(-growth / 1000), negated. kFrag: the growth
// in steps of kFragStep, so that nodes within a step tie and go to the first node of the seeded
// order (which keeps filling the same nodes).
constexpr double kFragStep = 80;
double FragRank(PlacementPolicy policy, double growth) {
  if (policy == PlacementPolicy::kFgd) {
    const double sigmoid = 1.0 / (1.0 + std::exp(growth / 1000));
    return -static_cast<double>(
        static_cast<std::int64_t>(sigmoid * static_cast<double>(kMaxScore)));
  }
  return std::floor(growth / kFragStep + 0.5);
}

// MeasureFrag's answer, kept by the model until the node changes (nodes of at most 64 devices).
bool NodeScorer::ScoreFrag(NodeId n, const NodeState& node, bool allow_span,
                           std::vector<DeviceShare>& devices, double& score) {
  if (node.devices.size() > 64) return MeasureFrag(n, node, allow_span, devices, score);
  request_.allow_span = allow_span;
  if (const FragModel::Scored* kept = frag_->Recall(state_, n, request_)) {
    if (!kept->fits) return false;
    score = kept->score;
    for (std::uint64_t bits = kept->devices; bits != 0; bits &= bits - 1) {
      const auto d = static_cast<std::uint32_t>(std::countr_zero(bits));
      if (req_.shared()) {
        devices.push_back({d, req_.gpu, req_.gpu_memory});
      } else {
        devices.push_back({d, kWholeGpu, node.devices[d].memory});
      }
    }
    return true;
  }
  FragModel::Scored scored;
  scored.fits = MeasureFrag(n, node, allow_span, devices, score);
  if (scored.fits) {
    scored.score = score;
    for (const DeviceShare& d : devices) scored.devices |= std::uint64_t{1} << d.device;
  }
  frag_->Keep(state_, n, request_, scored);
  return scored.fits;
}

// The devices that least increase the node's expected fragmentation, and the node's score.
bool NodeScorer::MeasureFrag(NodeId n, const NodeState& node, bool allow_span,
                             std::vector<DeviceShare>& devices, double& score) {
  count_ = 0;
  for (std::uint32_t d = 0; d < node.devices.size(); ++d) {
    const DeviceState& dev = node.devices[d];
    if (type_ != kNone && dev.type != type_) continue;
    frees_[count_] = dev.free.value();
    index_[count_] = d;
    ++count_;
  }
  const std::span<const std::int64_t> frees(frees_.data(), count_);
  const GpuTypeId node_type = type_ != kNone         ? type_
                              : node.devices.empty() ? kNone
                                                     : node.devices.front().type;
  const std::int64_t cpu = node.cpu_free.value();
  const double before = frag_->ExpectedNow(state_, n, frees, cpu, node_type);
  const std::int64_t cpu_after = cpu - req_.cpu.value();
  const PlacementPolicy policy = options_.policy;
  if (req_.gpu.value() == 0) {
    score = FragRank(policy, frag_->Expected(frees, cpu_after, node_type) - before);
    return true;
  }
  if (!req_.shared()) {
    if (!WholeDevices(node, req_, type_, allow_span, devices)) return false;
    for (const DeviceShare& d : devices) {
      for (std::size_t i = 0; i < count_; ++i) {
        if (index_[i] == d.device) frees_[i] = 0;
      }
    }
    score = FragRank(policy, frag_->Expected(frees, cpu_after, node_type) - before + type_cost_);
    return true;
  }
  // A share: each device that holds it (devices with equal free shares give the same result:
  // only the first is tried). FGD keeps the first device of the best score; kFrag the smallest
  // growth, then the least free device.
  bool found = false;
  double best = 0;
  std::uint32_t best_device = kNone;
  for (std::size_t i = 0; i < count_; ++i) {
    const DeviceState& dev = node.devices[index_[i]];
    if (!Usable(dev, req_, type_) || dev.free < req_.gpu || dev.memory_free < req_.gpu_memory)
      continue;
    bool seen = false;
    for (std::size_t k = 0; k < i && !seen; ++k) {
      const DeviceState& other = node.devices[index_[k]];
      seen = frees_[k] == frees_[i] && Usable(other, req_, type_) &&
             other.memory_free >= req_.gpu_memory;
    }
    if (seen) continue;
    const std::int64_t keep = frees_[i];
    frees_[i] -= req_.gpu.value();
    double growth = frag_->Expected(frees, cpu_after, node_type) - before;
    frees_[i] = keep;
    if (policy == PlacementPolicy::kFgd) growth = FragRank(policy, growth);
    if (!found || growth < best - 1e-9 ||
        (policy != PlacementPolicy::kFgd && growth <= best + 1e-9 &&
         dev.free < node.devices[best_device].free)) {
      found = true;
      best = growth;
      best_device = index_[i];
    }
  }
  if (!found) return false;
  devices.push_back({best_device, req_.gpu, req_.gpu_memory});
  score = policy == PlacementPolicy::kFgd ? best : FragRank(policy, best + type_cost_);
  return true;
}

}  // namespace arbiter::engine
