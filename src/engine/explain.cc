#include <algorithm>
#include <array>
#include <map>
#include <tuple>

#include "engine/stages.h"

namespace arbiter::engine {
namespace {

// The task the filter explains: the largest one, as placement tries it first.
const TaskRequest& LargestTask(const Job& job) {
  const TaskRequest* largest = &job.groups.front().request;
  for (const TaskGroup& g : job.groups) {
    const TaskRequest& r = g.request;
    if (std::tie(r.gpu, r.cpu, r.memory) > std::tie(largest->gpu, largest->cpu, largest->memory)) largest = &r;
  }
  return *largest;
}

}  // namespace

Reason ExplainPlacement(const ClusterState& state, const JobFilter& filter) {
  const Job& job = *filter.job;
  const TaskRequest& task = LargestTask(job);
  const Topology& topo = state.topology();
  Reason reason;
  reason.nodes_total = static_cast<std::int32_t>(state.node_count());

  std::array<std::int32_t, kCauseCount> counts{};
  std::int32_t fit_now = 0;
  // GPUs of the job's type on nodes that could ever host its largest task, per domain of the
  // level the gang must stay in (node ids at the node level; the whole cluster as key 0).
  const bool required = job.topology.mode == ConstraintMode::kRequired;
  const int level = required ? job.topology.level : -1;
  std::map<std::uint64_t, std::int64_t> capacity;
  bool ever = false;
  for (NodeId n = 0; n < state.node_count(); ++n) {
    if (auto cause = FilterNode(state, n, task, filter)) {
      ++counts[static_cast<std::size_t>(*cause)];
    } else {
      ++fit_now;
    }
    if (FilterNodeEver(state, n, task, job, filter.type)) continue;
    ever = true;
    const NodeState& node = state.node(n);
    if (level == topo.nvlink_level()) {
      for (const DeviceState& d : node.devices) {
        if (d.type == filter.type) ++capacity[(std::uint64_t{n} << 32) | d.nvlink_group];
      }
      continue;
    }
    std::uint64_t key = 0;
    if (level == topo.node_level()) key = n;
    if (level >= 0 && level < topo.node_level()) key = node.domains[static_cast<std::size_t>(level)];
    for (const DeviceState& d : node.devices) capacity[key] += d.type == filter.type;
  }
  for (int c = 0; c < kCauseCount; ++c) {
    if (counts[static_cast<std::size_t>(c)] > 0) reason.node_counts.push_back({static_cast<Cause>(c), counts[static_cast<std::size_t>(c)]});
  }
  std::stable_sort(reason.node_counts.begin(), reason.node_counts.end(), [](const CauseCount& a, const CauseCount& b) { return a.nodes > b.nodes; });

  std::int64_t devices = 0;
  for (const TaskGroup& g : job.groups) devices += g.count * std::max<std::int64_t>(g.request.whole_gpus(), g.request.shared() ? 1 : 0);
  std::int64_t largest_domain = 0;
  for (const auto& [key, n] : capacity) largest_domain = std::max(largest_domain, n);

  if (fit_now > 0) {
    reason.stage = Stage::kPlace;
    reason.cause = required ? Cause::kTopology : Cause::kGang;
    if (required) reason.detail = "required level " + topo.levels[static_cast<std::size_t>(level)];
  } else {
    reason.stage = Stage::kFilter;
    reason.cause = reason.node_counts.empty() ? Cause::kInsufficientGpu : reason.node_counts.front().cause;
  }
  if (!ever) {
    reason.verdict = Verdict::kNever;
  } else if (filter.type != kNone && largest_domain < devices) {
    reason.verdict = Verdict::kNever;
    reason.stage = Stage::kPlace;
    reason.cause = required ? Cause::kTopology : Cause::kGang;
    const std::string where = level < 0 ? "the cluster" : "the largest " + topo.levels[static_cast<std::size_t>(level)];
    reason.detail = where + " has " + std::to_string(largest_domain) + " " + state.gpu_type_name(filter.type) +
                    " GPUs the job may use; it needs " + std::to_string(devices);
  }
  return reason;
}

}  // namespace arbiter::engine
