#include <algorithm>
#include <array>
#include <tuple>
#include <vector>

#include "core/engine/stages.h"

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

EverFit EverFitOn(const ClusterState& state, const Job& job, GpuTypeId t) {
  const TaskRequest& task = LargestTask(job);
  const Topology& topo = state.topology();
  const bool required = job.topology.mode == ConstraintMode::kRequired;
  const int level = required ? job.topology.level : -1;
  EverFit out;
  out.type = t;
  for (const TaskGroup& g : job.groups)
    out.devices +=
        g.count * std::max<std::int64_t>(g.request.whole_gpus(), g.request.shared() ? 1 : 0);
  // Capacity per scope of the required level. An NVLink group and a node lie within one node, so
  // they are counted node by node; a domain (an operator level) adds up its nodes, and without a
  // required level the whole cluster is one scope.
  const bool per_domain = level >= 0 && level < topo.node_level();
  std::vector<std::int64_t> domains(per_domain ? state.domain_count() : 0, 0);
  std::vector<std::int64_t> groups;  // of the node at hand, at the NVLink level
  std::int64_t cluster = 0;
  // A node without devices of `t` never hosts the task on `t`: with a type, only its nodes (in
  // id order, like the scan of every node for a task without GPUs).
  std::vector<NodeId> all_nodes;
  if (t == kNone) {
    all_nodes.resize(state.node_count());
    for (NodeId n = 0; n < all_nodes.size(); ++n) all_nodes[n] = n;
  }
  const std::vector<NodeId>& scan = t == kNone ? all_nodes : state.NodesOfType(t);
  for (std::size_t i = 0; i < scan.size() && !out.fits(); ++i) {
    const NodeId n = scan[i];
    if (FilterNodeEver(state, n, task, job, t)) continue;
    out.ever = true;
    const NodeState& node = state.node(n);
    if (level == topo.nvlink_level()) {
      groups.assign(node.nvlink_groups, 0);
      for (const DeviceState& d : node.devices) {
        if (d.type == t) out.largest = std::max(out.largest, ++groups[d.nvlink_group]);
      }
      continue;
    }
    std::int64_t of_type = 0;
    for (const DeviceState& d : node.devices) of_type += d.type == t;
    std::int64_t scope = of_type;  // the node level: the node alone
    if (per_domain)
      scope = domains[node.domains[static_cast<std::size_t>(level)]] += of_type;
    else if (level != topo.node_level())
      scope = cluster += of_type;
    out.largest = std::max(out.largest, scope);
  }
  return out;
}

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
  } else if (filter.terms.empty() && !state.has_mixed_type_nodes() &&
             std::all_of(types.begin(), types.end(), [&](GpuTypeId t) {
               return task.gpu_memory <= state.TypeMinMemory(t) ||
                      task.gpu_memory > state.TypeMaxMemory(t);
             })) {
    // Every node has one GPU type, and the task's device memory floor is met by every device of
    // an accepted type or by none. A usual node (healthy, uncordoned, untainted) of an accepted
    // type then fails for its type's devices (kGpuMemory: none has the memory) or for their free
    // capacity (kInsufficientGpu) unless the free-capacity indexes list it: enough fully free
    // devices, or a partly used device with at least the task's share free. Only those, and the
    // unusual nodes, are evaluated; the others are counted in bulk.
    std::vector<bool> seen(nodes, false);
    auto memory_ok = [&](GpuTypeId t) { return task.gpu_memory <= state.TypeMinMemory(t); };
    std::int64_t unusual_count = 0, unusual_accepted = 0, unusual_memory_ok = 0;
    const IndexSet& unusual = state.UnusualNodes();
    for (NodeId n = unusual.Next(0, nodes); n < nodes; n = unusual.Next(n + 1, nodes)) {
      seen[n] = true;
      ++unusual_count;
      for (GpuTypeId t : types) {
        if (!state.node(n).gpu_types.Contains(t)) continue;
        ++unusual_accepted;
        unusual_memory_ok += memory_ok(t);
        break;  // (one type per node)
      }
      evaluate(n);
    }
    std::int64_t of_types = 0, of_memory_ok_types = 0, candidates = 0;
    auto candidate = [&](NodeId n) {
      if (seen[n]) return;
      seen[n] = true;
      ++candidates;
      evaluate(n);
    };
    const std::uint32_t max_devices = state.max_devices_per_node();
    for (GpuTypeId t : types) {
      if (t == kNone || t >= state.gpu_type_count()) continue;
      const auto count = static_cast<std::int64_t>(state.NodesOfType(t).size());
      of_types += count;
      if (!memory_ok(t)) continue;
      of_memory_ok_types += count;
      const std::int64_t least = task.shared() ? 1 : std::max<std::int64_t>(1, task.whole_gpus());
      for (std::int64_t c = least; c <= max_devices; ++c) {
        const IndexSet& set = state.NodesWithFreeDevices(t, static_cast<std::uint32_t>(c));
        for (NodeId n = set.Next(0, nodes); n < nodes; n = set.Next(n + 1, nodes)) candidate(n);
      }
      if (task.shared()) {
        const auto devices = static_cast<std::uint32_t>(state.device_count());
        for (int b = ClusterState::ShareBucket(task.gpu.value()); b < ClusterState::kShareBuckets;
             ++b) {
          const IndexSet& set = state.DevicesWithFreeShare(t, b);
          for (std::uint32_t d = set.Next(0, devices); d < devices; d = set.Next(d + 1, devices))
            candidate(state.DeviceNode(d));
        }
      }
    }
    counts[static_cast<std::size_t>(Cause::kInsufficientGpu)] +=
        static_cast<std::int32_t>(of_memory_ok_types - unusual_memory_ok - candidates);
    counts[static_cast<std::size_t>(Cause::kGpuMemory)] += static_cast<std::int32_t>(
        (of_types - unusual_accepted) - (of_memory_ok_types - unusual_memory_ok));
    counts[static_cast<std::size_t>(Cause::kGpuType)] += static_cast<std::int32_t>(
        static_cast<std::int64_t>(nodes) - unusual_count - (of_types - unusual_accepted));
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

  // Could the job ever fit? For each type, until one has a domain that holds the gang (then the
  // verdict is kWait and the largest domain is not reported).
  const bool required = job.topology.mode == ConstraintMode::kRequired;
  const int level = required ? job.topology.level : -1;
  bool ever = false, big_enough = false;
  std::int64_t largest_domain = 0, devices = 0;
  GpuTypeId largest_type = types.empty() ? kNone : types.front();
  for (GpuTypeId t : types) {
    const EverFit fit = EverFitOn(state, job, t);
    devices = fit.devices;
    ever = ever || fit.ever;
    if (fit.ever && fit.largest > largest_domain) {
      largest_domain = fit.largest;
      largest_type = t;
    }
    if (fit.fits()) {
      big_enough = true;
      break;
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
