#include <algorithm>
#include <array>
#include <tuple>
#include <vector>

#include "engine/stages.h"

namespace arbiter::engine {
namespace {

// The task the filter explains: the largest one, as placement tries it first.
const TaskRequest& LargestTask(const Job& job) {
  const TaskRequest* largest = &job.groups.front().request;
  for (const TaskGroup& g : job.groups) {
    const TaskRequest& r = g.request;
    if (std::tie(r.gpu, r.cpu, r.memory) > std::tie(largest->gpu, largest->cpu, largest->memory))
      largest = &r;
  }
  return *largest;
}

}  // namespace

Reason ExplainPlacement(const ClusterState& state, const JobFilter& filter,
                        std::span<const GpuTypeId> types) {
  const Job& job = *filter.job;
  const TaskRequest& task = LargestTask(job);
  const Topology& topo = state.topology();
  Reason reason;
  reason.nodes_total = static_cast<std::int32_t>(state.node_count());

  // A node fits if it fits for any of the types; otherwise it is counted under the cause that got
  // furthest through the filter among the types it has (a node with none of them: kGpuType).
  std::array<std::int32_t, kCauseCount> counts{};
  std::int32_t fit_now = 0;
  JobFilter typed = filter;
  auto evaluate = [&](NodeId n) {
    std::optional<Cause> cause = Cause::kNodeUnhealthy;
    bool first = true;
    for (GpuTypeId t : types) {
      if (t != kNone && !state.node(n).gpu_types.Contains(t) && !first) continue;
      typed.type = t;
      std::optional<Cause> c = FilterNode(state, n, task, typed);
      if (!c || first || (*c != Cause::kGpuType && (*cause == Cause::kGpuType || *c > *cause)))
        cause = c;
      first = false;
      if (!cause) break;
    }
    if (cause) {
      ++counts[static_cast<std::size_t>(*cause)];
    } else {
      ++fit_now;
    }
  };
  const NodeId nodes = static_cast<NodeId>(state.node_count());
  if (types.empty() || types.front() == kNone || !job.node_selector.empty()) {
    for (NodeId n = 0; n < nodes; ++n) evaluate(n);
  } else {
    // Without a node selector, a healthy, uncordoned, untainted node without any accepted GPU
    // type fails for its type: count those in bulk and look only at the others.
    std::vector<bool> seen(nodes, false);
    std::int32_t visited = 0;
    const IndexSet& unusual = state.UnusualNodes();
    for (NodeId n = unusual.Next(0, nodes); n < nodes; n = unusual.Next(n + 1, nodes)) {
      seen[n] = true;
      ++visited;
      evaluate(n);
    }
    for (GpuTypeId t : types) {
      for (NodeId n : state.NodesOfType(t)) {
        if (seen[n]) continue;
        seen[n] = true;
        ++visited;
        evaluate(n);
      }
    }
    counts[static_cast<std::size_t>(Cause::kGpuType)] += static_cast<std::int32_t>(nodes) - visited;
  }
  for (int c = 0; c < kCauseCount; ++c) {
    if (counts[static_cast<std::size_t>(c)] > 0)
      reason.node_counts.push_back({static_cast<Cause>(c), counts[static_cast<std::size_t>(c)]});
  }
  std::stable_sort(reason.node_counts.begin(), reason.node_counts.end(),
                   [](const CauseCount& a, const CauseCount& b) { return a.nodes > b.nodes; });

  // Could the job ever fit? For each type: the GPUs on nodes that could ever host its largest task,
  // per domain of the level the gang must stay in (node ids at the node level, (node, group) at
  // the NVLink level, one key for the whole cluster).
  const bool required = job.topology.mode == ConstraintMode::kRequired;
  const int level = required ? job.topology.level : -1;
  std::int64_t devices = 0;
  for (const TaskGroup& g : job.groups)
    devices += g.count * std::max<std::int64_t>(g.request.whole_gpus(), g.request.shared() ? 1 : 0);
  bool ever = false, big_enough = false;
  std::int64_t largest_domain = 0;
  GpuTypeId largest_type = types.empty() ? kNone : types.front();
  // Capacity per key: global device index of the node's first device + group (NVLink level), node
  // id (node level), domain id (operator levels), or 0 (the whole cluster).
  std::size_t slots = 1;
  if (level == topo.nvlink_level()) slots = state.device_count();
  if (level == topo.node_level()) slots = state.node_count();
  if (level >= 0 && level < topo.node_level()) slots = state.domain_count();
  std::vector<std::int64_t> capacity;
  for (GpuTypeId t : types) {
    // Once one type has a domain that holds the gang, the verdict is kWait and the largest domain
    // is not reported: the rest of the scan cannot change the reason.
    if (big_enough) break;
    capacity.assign(slots, 0);
    bool ever_t = false;
    std::int64_t largest = 0;
    for (NodeId n = 0; n < state.node_count() && !big_enough; ++n) {
      if (FilterNodeEver(state, n, task, job, t)) continue;
      ever_t = true;
      const NodeState& node = state.node(n);
      if (level == topo.nvlink_level()) {
        for (const DeviceState& d : node.devices) {
          if (d.type == t)
            largest = std::max(largest, ++capacity[node.first_device + d.nvlink_group]);
        }
      } else {
        std::size_t key = 0;
        if (level == topo.node_level()) key = n;
        if (level >= 0 && level < topo.node_level())
          key = node.domains[static_cast<std::size_t>(level)];
        std::int64_t of_type = 0;
        for (const DeviceState& d : node.devices) of_type += d.type == t;
        largest = std::max(largest, capacity[key] += of_type);
      }
      big_enough = t == kNone || largest >= devices;
    }
    ever = ever || ever_t;
    if (!ever_t) continue;
    if (largest > largest_domain) {
      largest_domain = largest;
      largest_type = t;
    }
  }

  if (fit_now > 0) {
    reason.stage = Stage::kPlace;
    reason.cause = required ? Cause::kTopology : Cause::kGang;
    if (required) reason.detail = "required level " + topo.levels[static_cast<std::size_t>(level)];
  } else {
    reason.stage = Stage::kFilter;
    reason.cause =
        reason.node_counts.empty() ? Cause::kInsufficientGpu : reason.node_counts.front().cause;
  }
  if (!ever) {
    reason.verdict = Verdict::kNever;
  } else if (!big_enough) {
    reason.verdict = Verdict::kNever;
    reason.stage = Stage::kPlace;
    reason.cause = required ? Cause::kTopology : Cause::kGang;
    const std::string where =
        level < 0 ? "the cluster" : "the largest " + topo.levels[static_cast<std::size_t>(level)];
    reason.detail = where + " has " + std::to_string(largest_domain) + " " +
                    state.gpu_type_name(largest_type) + " GPUs the job may use; it needs " +
                    std::to_string(devices);
  }
  return reason;
}

}  // namespace arbiter::engine
