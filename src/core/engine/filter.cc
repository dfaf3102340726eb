#include <algorithm>

#include "core/engine/stages.h"

namespace arbiter::engine {
namespace {

bool Matches(const Labels& labels, const Labels& selector) {
  for (const auto& [key, value] : selector) {
    auto it = labels.find(key);
    if (it == labels.end() || it->second != value) return false;
  }
  return true;
}

// Whether the job tolerates every taint it must: NoSchedule always, PreferNoSchedule when strict.
bool ToleratesTaints(const NodeState& node, const Job& job, bool strict) {
  for (const Taint& taint : node.taints) {
    if (taint.effect == TaintEffect::kPreferNoSchedule && !strict) continue;
    const bool tolerated = std::any_of(job.tolerations.begin(), job.tolerations.end(),
                                       [&](const Toleration& t) { return t.Tolerates(taint); });
    if (!tolerated) return false;
  }
  return true;
}

// The key under which a node is grouped at `level`: its domain above the node level, else itself.
std::uint32_t LevelKey(const ClusterState& state, NodeId node, int level) {
  if (level >= 0 && level < state.topology().node_level())
    return state.node(node).domains[static_cast<std::size_t>(level)];
  return node;
}

}  // namespace

JobFilter MakeJobFilter(const ClusterState& state, const Job& job, GpuTypeId type, bool strict,
                        std::span<const PlacedJob> placed_this_cycle) {
  JobFilter filter;
  filter.job = &job;
  filter.type = type;
  filter.strict = strict;
  if (job.affinity.empty()) return filter;
  for (const AffinityTerm& term : job.affinity) {
    if (!term.required && !strict) continue;
    JobFilter::Term t;
    t.level = term.level;
    t.anti = term.anti;
    auto add = [&](const Job& other, const Allocation& allocation) {
      if (other.id == job.id || !Matches(other.labels, term.match)) return;
      for (const TaskAllocation& task : allocation.tasks)
        t.keys.insert(LevelKey(state, task.node, term.level));
    };
    for (const auto& [id, running] : state.running()) add(running.job, running.allocation);
    for (const PlacedJob& p : placed_this_cycle) add(*p.job, *p.allocation);
    filter.terms.push_back(std::move(t));
  }
  return filter;
}

std::optional<Cause> FilterNode(const ClusterState& state, NodeId n, const TaskRequest& request,
                                const JobFilter& filter) {
  const NodeState& node = state.node(n);
  const Job& job = *filter.job;
  if (!node.healthy) return Cause::kNodeUnhealthy;
  if (node.cordoned) return Cause::kNodeCordoned;
  if (!node.taints.empty() && !ToleratesTaints(node, job, filter.strict))
    return Cause::kUntoleratedTaint;
  if (!job.node_selector.empty() && !Matches(node.labels, job.node_selector))
    return Cause::kNodeSelector;
  if (request.gpu.value() > 0) {
    if (!node.gpu_types.Contains(filter.type)) return Cause::kGpuType;
    if (!request.shared() && request.gpu_memory.value() == 0) {
      // Whole devices with no memory floor: the free-device count says it all.
      if (state.NodeFreeDevices(n, filter.type) < request.whole_gpus())
        return Cause::kInsufficientGpu;
    } else {
      bool memory_ok = false, free_ok = false;
      std::int64_t whole_free = 0;
      for (const DeviceState& dev : node.devices) {
        if (dev.type != filter.type || dev.memory < request.gpu_memory) continue;
        memory_ok = true;
        if (request.shared()) {
          free_ok = free_ok || (dev.free >= request.gpu && dev.memory_free >= request.gpu_memory);
        } else if (dev.free == kWholeGpu) {
          ++whole_free;
        }
      }
      if (!memory_ok) return Cause::kGpuMemory;
      if (!request.shared()) free_ok = whole_free >= request.whole_gpus();
      if (!free_ok) return Cause::kInsufficientGpu;
    }
  }
  if (node.cpu_free < request.cpu) return Cause::kInsufficientCpu;
  if (node.memory_free < request.memory) return Cause::kInsufficientMemory;
  for (const JobFilter::Term& term : filter.terms) {
    const bool present = term.keys.count(LevelKey(state, n, term.level)) > 0;
    if (!term.anti && !present) return Cause::kAffinity;
    if (term.anti && present) return Cause::kAntiAffinity;
  }
  return std::nullopt;
}

std::optional<Cause> FilterNodeEver(const ClusterState& state, NodeId n, const TaskRequest& request,
                                    const Job& job, GpuTypeId type) {
  const NodeState& node = state.node(n);
  if (!node.taints.empty() && !ToleratesTaints(node, job, /*strict=*/false))
    return Cause::kUntoleratedTaint;
  if (!job.node_selector.empty() && !Matches(node.labels, job.node_selector))
    return Cause::kNodeSelector;
  if (request.gpu.value() > 0) {
    if (!node.gpu_types.Contains(type)) return Cause::kGpuType;
    std::int64_t devices = 0;
    for (const DeviceState& dev : node.devices)
      devices += dev.type == type && dev.memory >= request.gpu_memory;
    if (devices == 0) return Cause::kGpuMemory;
    if (devices < std::max<std::int64_t>(1, request.whole_gpus())) return Cause::kInsufficientGpu;
  }
  if (node.cpu < request.cpu) return Cause::kInsufficientCpu;
  if (node.memory < request.memory) return Cause::kInsufficientMemory;
  return std::nullopt;
}

}  // namespace arbiter::engine
