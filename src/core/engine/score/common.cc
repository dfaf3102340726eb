// What the policies share: their names, the devices a node offers a task, the seeded draws.
#include <algorithm>
#include <array>
#include <string_view>

#include "core/engine/score/score.h"

namespace arbiter {

const char* PlacementPolicyName(PlacementPolicy policy) {
  switch (policy) {
    case PlacementPolicy::kArbiter:
      return "arbiter";
    case PlacementPolicy::kRandom:
      return "random";
    case PlacementPolicy::kBestFit:
      return "best-fit";
    case PlacementPolicy::kPacking:
      return "packing";
    case PlacementPolicy::kDotProduct:
      return "dot-product";
    case PlacementPolicy::kClustering:
      return "clustering";
    case PlacementPolicy::kFrag:
      return "frag";
    case PlacementPolicy::kFgd:
      return "fgd";
  }
  return "?";
}

bool ParsePlacementPolicy(std::string_view name, PlacementPolicy& policy) {
  for (PlacementPolicy p : kAllPlacementPolicies) {
    if (name == PlacementPolicyName(p)) {
      policy = p;
      return true;
    }
  }
  return false;
}

}  // namespace arbiter

namespace arbiter::engine {

NodeGpu CountGpu(const NodeState& node, GpuTypeId type) {
  NodeGpu g;
  for (const DeviceState& dev : node.devices) {
    if (type != kNone && dev.type != type) continue;
    g.free += dev.free.value();
    ++g.devices;
    g.whole_free += dev.free == kWholeGpu;
  }
  return g;
}

std::uint32_t BestShareDevice(const NodeState& node, const TaskRequest& req, GpuTypeId type) {
  std::uint32_t best = kNone;
  for (std::uint32_t d = 0; d < node.devices.size(); ++d) {
    const DeviceState& dev = node.devices[d];
    if (!Usable(dev, req, type) || dev.free < req.gpu || dev.memory_free < req.gpu_memory) continue;
    if (best == kNone || dev.free < node.devices[best].free) best = d;
  }
  return best;
}

bool WholeDevices(const NodeState& node, const TaskRequest& req, GpuTypeId type, bool allow_span,
                  std::vector<DeviceShare>& out) {
  const std::int64_t want = req.whole_gpus();
  std::array<std::uint32_t, kMaxDevicesPerNode> free_in_group;  // groups number at most devices
  std::fill_n(free_in_group.begin(), node.nvlink_groups, 0u);
  for (const DeviceState& dev : node.devices) {
    if (Usable(dev, req, type) && dev.free == kWholeGpu) ++free_in_group[dev.nvlink_group];
  }
  std::uint32_t group = kNone;
  for (std::uint32_t g = 0; g < node.nvlink_groups; ++g) {
    if (free_in_group[g] >= want && (group == kNone || free_in_group[g] < free_in_group[group]))
      group = g;
  }
  if (group == kNone && !allow_span) return false;
  std::int64_t n = want;
  for (std::uint32_t d = 0; d < node.devices.size() && n > 0; ++d) {
    const DeviceState& dev = node.devices[d];
    if (!Usable(dev, req, type) || dev.free != kWholeGpu) continue;
    if (group != kNone && dev.nvlink_group != group) continue;
    out.push_back({d, kWholeGpu, dev.memory});
    --n;
  }
  return n == 0;
}

std::uint64_t TieBreak(std::uint64_t seed, NodeId node) {
  return Mix(seed ^ Mix(0x6a09e667f3bcc909ull + node));
}

std::uint64_t RandomDraw(std::uint64_t seed, JobId job, std::uint64_t what) {
  return Mix(seed ^ Mix(job ^ Mix(0xbb67ae8584caa73bull + what)));
}

}  // namespace arbiter::engine
