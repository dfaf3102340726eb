// CheckPlan: what no cycle may ever decide, checked on a plan against the state it was made on.
#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "arbiter/engine.h"
#include "core/engine/stages.h"
#include "core/state/cluster_state.h"

namespace arbiter {

using engine::FormatGpus;

Status CheckPlan(const ClusterState& state, std::span<const Job> pending, const Plan& plan) {
  std::vector<std::string> violations;
  // Devices: what the running jobs that stay and the binds take of each.
  std::map<std::uint32_t, std::int64_t> device_milli;
  auto take = [&](const Allocation& a, JobId job) {
    for (const TaskAllocation& t : a.tasks) {
      for (const DeviceShare& d : t.devices) {
        const std::uint32_t device = state.node(t.node).first_device + d.device;
        device_milli[device] += d.gpu.value();
        if (device_milli[device] > kMilliPerGpu)
          violations.push_back("job " + std::to_string(job) + " is given device " +
                               std::to_string(d.device) + " of node " + state.node(t.node).name +
                               " beyond its capacity (" + FormatGpus(device_milli[device]) +
                               " GPUs)");
      }
    }
  };
  std::set<JobId> evicted;
  std::multimap<JobId, const RunningJob*> victims;  // by preemptor
  for (const Eviction& e : plan.evictions) {
    const RunningJob* r = state.FindRunning(e.job);
    if (!r) {
      violations.push_back("eviction of job " + std::to_string(e.job) + ", which is not running");
      continue;
    }
    if (!evicted.insert(e.job).second)
      violations.push_back("job " + std::to_string(e.job) + " is evicted twice");
    if (!state.priority_class(r->job.priority_class).preemptible ||
        !state.queue(r->job.queue).spec.preemptable)
      violations.push_back("job " + std::to_string(e.job) + " is not preemptible but is evicted");
    victims.emplace(e.preemptor, r);
  }
  for (const auto& [id, r] : state.running()) {
    if (!evicted.count(id)) take(r.allocation, id);
  }
  // Quota: each bind, in the plan's order (its victims gone first), is one the quota tree admits
  // there: no queue above its max, no borrowing beyond a limit or above a tree's nominal quota.
  QuotaTree quota = state.quota_tree();
  for (const Bind& b : plan.binds) {
    if (b.pending_index >= pending.size()) {
      violations.push_back("bind of job " + std::to_string(b.job) + " names no pending job");
      continue;
    }
    take(b.allocation, b.job);
    const auto [first, last] = victims.equal_range(b.job);
    for (auto it = first; it != last; ++it) {
      const RunningJob& v = *it->second;
      quota.Charge(v.job.queue, v.allocation.gpu_type, -v.job.total_gpu().value());
    }
    const Job& job = pending[b.pending_index];
    const QuotaDecision d = quota.Admit(job.queue, b.allocation.gpu_type, job.total_gpu().value());
    if (!d.ok) {
      violations.push_back("job " + std::to_string(b.job) + " is started beyond its quota (queue " +
                           state.queue(d.at).spec.name + ", " +
                           state.quota_resource_name(d.resource) + ": " + FormatGpus(d.after) +
                           " of " + FormatGpus(d.limit) + ")");
    }
    quota.Charge(job.queue, b.allocation.gpu_type, job.total_gpu().value());
  }
  if (violations.empty()) return Status::Ok();
  std::string text = "the plan at " + std::to_string(plan.now) + " ms breaks an invariant: ";
  for (std::size_t i = 0; i < violations.size(); ++i) text += (i ? "; " : "") + violations[i];
  // The cycle's state, as far as the rules read it: the jobs, and each queue's use of each
  // quota resource it uses or is limited in (in use / nominal, max).
  text += ". The state: " + std::to_string(state.running().size()) + " running, " +
          std::to_string(pending.size()) + " pending, " + std::to_string(plan.binds.size()) +
          " bound, " + std::to_string(plan.evictions.size()) + " evicted; queues:";
  const QuotaTree& tree = state.quota_tree();
  for (QueueId q = 0; q < state.queue_count(); ++q) {
    for (std::size_t r = 0; r < tree.resource_count(); ++r) {
      const QuotaLimits& l = tree.limits(q, r);
      if (tree.usage(q, r) == 0 && !l.limited && l.max < 0) continue;
      text += " " + state.queue(q).spec.name + "/" + state.quota_resource_name(r) + " " +
              FormatGpus(tree.usage(q, r));
      if (l.limited) text += " of " + FormatGpus(l.nominal);
      if (l.max >= 0) text += " max " + FormatGpus(l.max);
      text += ";";
    }
  }
  return Status::Internal(text);
}

}  // namespace arbiter
