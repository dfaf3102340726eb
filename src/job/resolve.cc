// Between a job's names and a ClusterState's interned ids.
#include "job/resolve.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include "core/model/edit_distance.h"
#include "core/state/cluster_state.h"
#include "job/names.h"

namespace arbiter::job {
namespace {

// A name the cluster does not have: not found, naming the field.
Status Unknown(std::string field, std::string_view what, std::string_view name,
               const std::vector<std::string>& known) {
  return Status::NotFound(UnknownName(what, name, known), std::move(field));
}

std::vector<std::string> QueueNames(const ClusterState& state) {
  std::vector<std::string> names;
  for (std::size_t i = 0; i < state.queue_count(); ++i) {
    const QueueInfo& q = state.queue(static_cast<QueueId>(i));
    if (q.children.empty()) names.push_back(q.spec.name);
  }
  return names;
}

std::vector<std::string> ClassNames(const ClusterState& state) {
  std::vector<std::string> names;
  for (std::size_t i = 0; i < state.priority_class_count(); ++i) {
    names.push_back(state.priority_class(static_cast<PriorityClassId>(i)).name);
  }
  return names;
}

std::vector<std::string> GpuTypeNames(const ClusterState& state) {
  std::vector<std::string> names;
  for (std::size_t i = 0; i < state.gpu_type_count(); ++i) {
    names.push_back(state.gpu_type_name(static_cast<GpuTypeId>(i)));
  }
  return names;
}

}  // namespace

std::optional<std::string> Suggest(std::string_view name, const std::vector<std::string>& known) {
  // Close enough: about one edit per three characters, at least one, at most three.
  std::size_t limit = std::clamp<std::size_t>(name.size() / 3, 1, 3);
  std::optional<std::string> best;
  std::size_t best_distance = limit + 1;
  for (const std::string& k : known) {
    std::size_t d = EditDistance(name, k, /*ignore_case=*/true);
    if (d < best_distance) {
      best_distance = d;
      best = k;
    }
  }
  return best;
}

std::string UnknownName(std::string_view what, std::string_view name,
                        const std::vector<std::string>& known, std::string_view list_label) {
  constexpr std::size_t kListCap = 24;
  std::string list;
  for (std::size_t i = 0; i < known.size() && i < kListCap; ++i) {
    list += (i > 0 ? ", " : "") + known[i];
  }
  if (known.size() > kListCap) list += fmt::format(", ... ({} more)", known.size() - kListCap);
  std::string out = known.empty()
                        ? fmt::format("unknown {} '{}' (none are defined)", what, name)
                        : fmt::format("unknown {} '{}' ({}: {})", what, name, list_label, list);
  if (std::optional<std::string> s = Suggest(name, known)) {
    out += fmt::format("; did you mean '{}'?", *s);
  }
  return out;
}

Result<Job> ToJob(JobId id, const JobSpec& spec, const ClusterState& state,
                  const std::string& priority_class) {
  Job job;
  job.id = id;
  job.name = spec.name;
  job.user = spec.user;
  std::optional<QueueId> queue = state.FindQueue(spec.queue);
  if (!queue) return Unknown("queue", "leaf queue", spec.queue, QueueNames(state));
  if (!state.queue(*queue).children.empty()) {
    // The engine takes jobs only in leaf queues; a parent's quota is its children's.
    return Status::InvalidArgument(
        fmt::format("queue '{}' has child queues; jobs go to leaf queues ({})", spec.queue,
                    fmt::join(QueueNames(state), ", ")),
        "queue");
  }
  job.queue = *queue;
  const std::string& class_name = priority_class.empty() ? spec.priority_class : priority_class;
  std::optional<PriorityClassId> pc = state.FindPriorityClass(class_name);
  if (!pc) return Unknown("priority_class", "priority class", class_name, ClassNames(state));
  job.priority_class = *pc;
  job.groups = spec.groups;
  for (std::size_t i = 0; i < spec.gpu_types.size(); ++i) {
    std::optional<GpuTypeId> type = state.FindGpuType(spec.gpu_types[i]);
    if (!type) {
      return Unknown(fmt::format("gpu_types[{}]", i), "GPU type", spec.gpu_types[i],
                     GpuTypeNames(state));
    }
    job.gpu_types.Add(*type);
  }
  const Topology& topology = state.topology();
  if (!spec.topology_level.empty()) {
    const int level = topology.LevelIndex(spec.topology_level);
    if (level < 0) {
      return Unknown("topology.level", "topology level", spec.topology_level, topology.levels);
    }
    job.topology = {level, spec.topology_mode};
  }
  job.node_selector = spec.node_selector;
  job.tolerations = spec.tolerations;
  job.labels = spec.labels;
  for (std::size_t i = 0; i < spec.affinity.size(); ++i) {
    const AffinitySpec& a = spec.affinity[i];
    const int level = topology.LevelIndex(a.level);
    if (level < 0) {
      return Unknown(fmt::format("affinity[{}].level", i), "topology level", a.level,
                     topology.levels);
    }
    job.affinity.push_back({a.match, level, a.anti, a.required});
  }
  job.submit_time = spec.submit_time;
  job.runtime_estimate = spec.runtime_estimate;
  job.checkpoint_interval = spec.checkpoint_interval;
  job.restart_overhead = spec.restart_overhead;
  return job;
}

JobSpec ToSpec(const Job& job, const ClusterState& state) {
  JobSpec spec;
  spec.name = job.name;
  spec.user = job.user;
  spec.queue = state.queue(job.queue).spec.name;
  spec.priority_class = state.priority_class(job.priority_class).name;
  spec.groups = job.groups;
  for (std::size_t t = 0; t < state.gpu_type_count(); ++t) {
    if (job.gpu_types.Contains(static_cast<GpuTypeId>(t))) {
      spec.gpu_types.push_back(state.gpu_type_name(static_cast<GpuTypeId>(t)));
    }
  }
  const Topology& topology = state.topology();
  if (job.topology.level >= 0 && job.topology.mode != ConstraintMode::kUnconstrained) {
    spec.topology_level = topology.levels[static_cast<std::size_t>(job.topology.level)];
    spec.topology_mode = job.topology.mode;
  }
  spec.node_selector = job.node_selector;
  spec.tolerations = job.tolerations;
  spec.labels = job.labels;
  for (const AffinityTerm& a : job.affinity) {
    spec.affinity.push_back(
        {a.match, topology.levels[static_cast<std::size_t>(a.level)], a.anti, a.required});
  }
  spec.submit_time = job.submit_time;
  spec.runtime_estimate = job.runtime_estimate;
  spec.checkpoint_interval = job.checkpoint_interval;
  spec.restart_overhead = job.restart_overhead;
  return spec;
}

Result<Allocation> ToAllocation(const StoredAllocation& stored, const ClusterState& state) {
  Allocation a;
  if (!stored.gpu_type.empty()) {
    std::optional<GpuTypeId> type = state.FindGpuType(stored.gpu_type);
    if (!type) {
      return Unknown("allocation.gpu_type", "GPU type", stored.gpu_type, GpuTypeNames(state));
    }
    a.gpu_type = *type;
  }
  for (std::size_t i = 0; i < stored.tasks.size(); ++i) {
    const StoredTask& t = stored.tasks[i];
    std::optional<NodeId> node = state.FindNode(t.node);
    if (!node) {
      return Status::NotFound(fmt::format("unknown node '{}'", t.node),
                              fmt::format("allocation.tasks[{}].node", i));
    }
    const std::size_t devices = state.node(*node).devices.size();
    for (std::size_t k = 0; k < t.devices.size(); ++k) {
      if (t.devices[k].device >= devices) {
        return Status::InvalidArgument(
            fmt::format("node '{}' has {} devices, got index {}", t.node, devices,
                        t.devices[k].device),
            fmt::format("allocation.tasks[{}].devices[{}].device", i, k));
      }
    }
    a.tasks.push_back({t.group, t.index, *node, t.cpu, t.memory, t.devices});
  }
  return a;
}

StoredAllocation ToStoredAllocation(const Allocation& allocation, const ClusterState& state) {
  StoredAllocation stored;
  if (allocation.gpu_type != kNone) stored.gpu_type = state.gpu_type_name(allocation.gpu_type);
  for (const TaskAllocation& t : allocation.tasks) {
    stored.tasks.push_back({t.group, t.index, state.node(t.node).name, t.cpu, t.memory, t.devices});
  }
  return stored;
}

}  // namespace arbiter::job
