// validate: what the cluster state cannot check of a pending job.
#include <string>

#include "core/engine/stages.h"

namespace arbiter::engine {

std::optional<std::string> ValidateJob(const ClusterState& state, const Job& job) {
  if (job.groups.empty()) return "the job has no task groups";
  for (const TaskGroup& g : job.groups) {
    auto where = [&g] { return "group '" + g.name + "': "; };
    if (g.count <= 0) return where() + "task count must be positive";
    const std::int64_t gpu = g.request.gpu.value();
    if (gpu < 0 || (gpu > kMilliPerGpu && gpu % kMilliPerGpu != 0))
      return where() + "GPU request must be a share of one device (1..1000 milli) or whole devices";
    if (g.request.cpu.value() < 0 || g.request.memory.value() < 0 ||
        g.request.gpu_memory.value() < 0)
      return where() + "requests must not be negative";
  }
  if (job.queue >= state.queue_count()) return "unknown queue";
  if (!state.queue(job.queue).children.empty())
    return "queue '" + state.queue(job.queue).spec.name +
           "' is a cohort; jobs go to its leaf queues";
  if (job.priority_class >= state.priority_class_count()) return "unknown priority class";
  const int levels = static_cast<int>(state.topology().levels.size());
  if (job.topology.mode != ConstraintMode::kUnconstrained &&
      (job.topology.level < 0 || job.topology.level >= levels))
    return "topology level out of range";
  for (const AffinityTerm& t : job.affinity) {
    if (t.level < 0 || t.level >= levels) return "affinity level out of range";
  }
  return std::nullopt;
}

}  // namespace arbiter::engine
