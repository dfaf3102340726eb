// Properties that hold for every random cluster and job stream: after every cycle the state's
// invariants hold (no device over-allocated, counts and indexes match the allocations), the cycle
// returns the state unchanged, no gang is partly placed, every bind honours the job's request and
// required topology, and no queue exceeds its max or borrowing limit.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <map>
#include <set>

#include "arbiter/engine.h"
#include "testing/builders.h"

namespace arbiter {
namespace {

const char* const kTypes[] = {"H800", "A100", "L40S"};

ClusterSpec RandomCluster(int max_nodes) {
  ClusterSpec spec = testing::Cluster({"leaf"});
  const int nodes = *rc::gen::inRange(1, max_nodes + 1);
  const int leaves = *rc::gen::inRange(1, 4);
  for (int i = 0; i < nodes; ++i) {
    const int gpus = i == 0 ? *rc::gen::element(1, 8) : *rc::gen::element(0, 1, 2, 4, 8);
    const int group = *rc::gen::element(0, 2, 4);
    const char* type =
        *rc::gen::elementOf(std::vector<const char*>(std::begin(kTypes), std::end(kTypes)));
    auto n = testing::Nodes("n" + std::to_string(i), 1, type, gpus, group,
                            {"leaf-" + std::to_string(i % leaves)});
    n[0].cpu = MilliCpu(*rc::gen::inRange(4, 65) * 1000);
    if (*rc::gen::inRange(0, 8) == 0)
      n[0].taints.push_back({"dedicated", "x", TaintEffect::kNoSchedule});
    if (*rc::gen::inRange(0, 8) == 0)
      n[0].taints.push_back({"soft", "y", TaintEffect::kPreferNoSchedule});
    if (*rc::gen::inRange(0, 10) == 0) n[0].cordoned = true;
    spec.nodes.push_back(n[0]);
  }
  spec.queues = {testing::Queue("org"), testing::Queue("a", "org"), testing::Queue("b", "org")};
  spec.queues[1].preemptable = *rc::gen::inRange(0, 4) != 0;
  spec.queues[2].reclaim = *rc::gen::inRange(0, 4) != 0;
  for (PriorityClassSpec& pc : spec.priority_classes) {
    pc.preemptible = *rc::gen::inRange(0, 4) != 0;
    pc.min_runtime = *rc::gen::element<Millis>(0, 60000, 180000);
    pc.max_evictions = *rc::gen::inRange(0, 3);
    pc.eviction_window = 600000;
    pc.eviction_cooldown = *rc::gen::element<Millis>(0, 120000);
    pc.grace_period = *rc::gen::element<Millis>(0, 30000);
  }
  for (int q = 1; q <= 2; ++q) {
    if (*rc::gen::arbitrary<bool>()) {
      QuotaSpec quota;
      quota.nominal = MilliGpu(*rc::gen::inRange(0, 16) * 1000);
      if (*rc::gen::arbitrary<bool>())
        quota.borrowing_limit = MilliGpu(*rc::gen::inRange(0, 8) * 1000);
      if (*rc::gen::arbitrary<bool>())
        quota.lending_limit = MilliGpu(*rc::gen::inRange(0, 8) * 1000);
      if (*rc::gen::arbitrary<bool>()) quota.max = MilliGpu(*rc::gen::inRange(0, 24) * 1000);
      spec.queues[static_cast<std::size_t>(q)]
          .quota[*rc::gen::element(std::string("gpu"), spec.nodes[0].devices[0].type)] = quota;
    }
  }
  return spec;
}

// A random job; `simple` keeps to small GPU gangs with no constraints (they contend more).
Job RandomJob(const ClusterState& state, JobId id, Millis now, bool simple) {
  Job job = testing::GpuJob(
      id, *rc::gen::inRange(1, simple ? 3 : 5),
      simple ? *rc::gen::element<std::int64_t>(500, 1000, 2000, 4000)
             : *rc::gen::element<std::int64_t>(0, 100, 250, 500, 900, 1000, 2000, 4000, 8000));
  job.queue = *rc::gen::element(*state.FindQueue("a"), *state.FindQueue("b"));
  job.priority_class = *rc::gen::inRange<PriorityClassId>(0, 3);
  job.submit_time = now - *rc::gen::inRange<Millis>(0, 100000);
  job.runtime_estimate = *rc::gen::element<Millis>(0, 60000, 600000, 7200000);
  if (simple) return job;
  job.groups[0].request.cpu = MilliCpu(*rc::gen::inRange(0, 9) * 1000);
  if (*rc::gen::inRange(0, 3) == 0) {
    TaskGroup extra = job.groups[0];
    extra.name = "extra";
    extra.count = *rc::gen::inRange(1, 3);
    extra.request.gpu = MilliGpu(*rc::gen::element<std::int64_t>(0, 500, 1000));
    job.groups.push_back(extra);
  }
  for (GpuTypeId t = 0; t < state.gpu_type_count(); ++t) {
    if (*rc::gen::inRange(0, 3) == 0) job.gpu_types.Add(t);
  }
  if (*rc::gen::inRange(0, 3) == 0) {
    job.topology.level = *rc::gen::inRange(0, static_cast<int>(state.topology().levels.size()));
    job.topology.mode = *rc::gen::element(ConstraintMode::kRequired, ConstraintMode::kPreferred);
  }
  if (*rc::gen::inRange(0, 4) == 0)
    job.tolerations.push_back({"dedicated", Toleration::Op::kExists, "", std::nullopt});
  if (*rc::gen::inRange(0, 5) == 0) {
    job.labels["app"] = *rc::gen::element(std::string("x"), std::string("y"));
    job.affinity.push_back({{{"app", *rc::gen::element(std::string("x"), std::string("y"))}},
                            *rc::gen::inRange(0, static_cast<int>(state.topology().levels.size())),
                            *rc::gen::arbitrary<bool>(),
                            *rc::gen::arbitrary<bool>()});
  }
  return job;
}

// What every eviction must satisfy, checked against the state before the plan is applied.
Status CheckEvictions(const ClusterState& state, const Plan& plan, const std::vector<Job>& pending,
                      std::int64_t max_gpus_per_cycle) {
  std::set<JobId> preemptors;
  for (const Bind& b : plan.binds) preemptors.insert(b.job);
  std::int64_t evicted = 0;
  for (const Eviction& e : plan.evictions) {
    const RunningJob* r = state.FindRunning(e.job);
    if (!r) return Status::Internal("evicted a job that is not running");
    const PriorityClassSpec& pc = state.priority_class(r->job.priority_class);
    if (!pc.preemptible) return Status::Internal("evicted a non-preemptible job");
    if (!state.queue(r->job.queue).spec.preemptable)
      return Status::Internal("evicted a job of a queue that is not preemptable");
    if (plan.now - r->start_time < pc.min_runtime)
      return Status::Internal("evicted a job inside its minimum runtime");
    const auto times = state.EvictionTimes(e.job);
    if (!times.empty() && plan.now - times.back() < pc.eviction_cooldown)
      return Status::Internal("evicted a job in its cooldown");
    if (pc.max_evictions > 0 && std::count_if(times.begin(), times.end(), [&](Millis t) {
                                  return t > plan.now - pc.eviction_window;
                                }) >= pc.max_evictions) {
      return Status::Internal("evicted a job past its eviction budget");
    }
    if (!preemptors.count(e.preemptor))
      return Status::Internal("evicted for a job that is not placed in the plan");
    const Job* preemptor = nullptr;
    for (const Job& j : pending) {
      if (j.id == e.preemptor) preemptor = &j;
    }
    if (!preemptor) return Status::Internal("preemptor is not pending");
    if (e.kind == Eviction::Kind::kWithinQueue &&
        (preemptor->queue != r->job.queue ||
         state.priority_class(preemptor->priority_class).value <= pc.value)) {
      return Status::Internal(
          "within-queue eviction by a job that is not of higher priority in the same queue");
    }
    evicted += r->job.total_gpu().value();
  }
  if (max_gpus_per_cycle >= 0 && evicted > max_gpus_per_cycle)
    return Status::Internal("evicted more GPUs than the cycle's cap");
  return Status::Ok();
}

// After a plan is applied, no queue that lost work to reclaim (and none to its own preemptors) is
// below its nominal quota in the resources its victims used.
Status CheckReclaimedQueues(const ClusterState& state, const Plan& plan,
                            const std::map<JobId, std::pair<QueueId, GpuTypeId>>& victims) {
  std::set<QueueId> within;
  for (const Eviction& e : plan.evictions) {
    if (e.kind == Eviction::Kind::kWithinQueue) within.insert(victims.at(e.job).first);
  }
  for (const Eviction& e : plan.evictions) {
    const auto [q, type] = victims.at(e.job);
    if (e.kind != Eviction::Kind::kReclaim || within.count(q)) continue;
    for (std::size_t r : {std::size_t{0}, std::size_t{1} + type}) {
      const QuotaLimits& l = state.quota(q, r);
      if (l.limited && state.usage(q, r) < l.nominal)
        return Status::Internal("reclaim took a queue below its nominal quota");
    }
  }
  return Status::Ok();
}

// What every bind must satisfy beyond what ClusterState::Bind checks itself.
Status CheckBind(const ClusterState& state, const Job& job, const Allocation& allocation) {
  if (job.topology.mode != ConstraintMode::kRequired) return Status::Ok();
  const int level = job.topology.level;
  std::set<std::uint64_t> domains, groups;
  for (const TaskAllocation& t : allocation.tasks) {
    const NodeState& node = state.node(t.node);
    if (level < state.topology().node_level()) {
      domains.insert(node.domains[static_cast<std::size_t>(level)]);
    } else {
      domains.insert(t.node);
    }
    // At the NVLink level, devices of one group (tasks without GPUs only share the node).
    if (level == state.topology().nvlink_level()) {
      for (const DeviceShare& d : t.devices) groups.insert(node.devices[d.device].nvlink_group);
    }
  }
  if (domains.size() > 1 || groups.size() > 1)
    return Status::Internal("job " + std::to_string(job.id) + " spans its required topology level");
  return Status::Ok();
}

Status CheckQuotas(const ClusterState& state) {
  for (QueueId q = 0; q < state.queue_count(); ++q) {
    for (std::size_t r = 0; r < state.quota_resource_count(); ++r) {
      const QuotaLimits& l = state.quota(q, r);
      if (!l.limited) continue;
      const std::int64_t used = state.usage(q, r);
      if (l.max >= 0 && used > l.max) return Status::Internal("queue over its max");
      if (l.borrowing_limit >= 0 && used - l.nominal > l.borrowing_limit)
        return Status::Internal("queue over its borrowing limit");
    }
  }
  return Status::Ok();
}

// The same decisions: binds (nodes, devices and shares), evictions, waits and reservations.
void SamePlan(const Plan& a, const Plan& b) {
  RC_ASSERT(a.binds.size() == b.binds.size());
  for (std::size_t i = 0; i < a.binds.size(); ++i) {
    RC_ASSERT(a.binds[i].job == b.binds[i].job);
    const std::vector<TaskAllocation>& x = a.binds[i].allocation.tasks;
    const std::vector<TaskAllocation>& y = b.binds[i].allocation.tasks;
    RC_ASSERT(x.size() == y.size());
    for (std::size_t t = 0; t < x.size(); ++t) {
      RC_ASSERT(x[t].node == y[t].node);
      RC_ASSERT(x[t].devices.size() == y[t].devices.size());
      for (std::size_t d = 0; d < x[t].devices.size(); ++d) {
        RC_ASSERT(x[t].devices[d].device == y[t].devices[d].device);
        RC_ASSERT(x[t].devices[d].gpu == y[t].devices[d].gpu);
      }
    }
  }
  RC_ASSERT(a.evictions.size() == b.evictions.size());
  for (std::size_t i = 0; i < a.evictions.size(); ++i)
    RC_ASSERT(a.evictions[i].job == b.evictions[i].job);
  RC_ASSERT(a.unplaced.size() == b.unplaced.size());
  for (std::size_t i = 0; i < a.unplaced.size(); ++i)
    RC_ASSERT(a.unplaced[i].job == b.unplaced[i].job);
  RC_ASSERT(a.reservations.size() == b.reservations.size());
  for (std::size_t i = 0; i < a.reservations.size(); ++i) {
    RC_ASSERT(a.reservations[i].job == b.reservations[i].job);
    RC_ASSERT(a.reservations[i].start == b.reservations[i].start);
  }
}

// Random cycles on a random cluster: up to `max_nodes` nodes, up to `max_arrivals` jobs per cycle,
// each running job ending after a cycle with probability 1 / `end_one_in`.
void RunRandomCycles(int max_nodes, int max_arrivals, int end_one_in, bool simple_jobs) {
  const ClusterSpec spec = RandomCluster(max_nodes);
  Result<ClusterState> created = ClusterState::Create(spec);
  RC_ASSERT(created.ok());
  ClusterState& state = created.value();
  EngineOptions options;
  options.preemption.max_gpus_per_cycle = *rc::gen::element<std::int64_t>(-1, 4000, 8000);
  options.backfill.reservations = *rc::gen::inRange(0, 3);
  options.placement.policy =
      *rc::gen::element(PlacementPolicy::kArbiter, PlacementPolicy::kFrag, PlacementPolicy::kFgd);
  Engine engine(options);
  JobId next_id = 1;
  std::vector<Job> pending;
  const int cycles = *rc::gen::inRange(1, 8);
  Millis now = 0;
  bool any_eviction = false;
  bool contended = false;
  bool any_reclaim = false;
  for (int cycle = 0; cycle < cycles; ++cycle) {
    now += *rc::gen::element<Millis>(30000, 60000, 120000);
    const int arrivals = *rc::gen::inRange(0, max_arrivals + 1);
    for (int i = 0; i < arrivals; ++i)
      pending.push_back(RandomJob(state, next_id++, now, simple_jobs));

    std::vector<std::uint64_t> stamps;
    for (NodeId n = 0; n < state.node_count(); ++n) stamps.push_back(state.NodeStamp(n));
    Plan plan = engine.Schedule(state, pending, now);
    Status restored = state.CheckInvariants();
    RC_ASSERT(restored.ok());
    Status lawful = CheckPlan(state, pending, plan);
    RC_ASSERT(lawful.ok());
    // The cycle gave back all it took, and the nodes' stamps with it.
    for (NodeId n = 0; n < state.node_count(); ++n) RC_ASSERT(state.NodeStamp(n) == stamps[n]);
    // Deterministic: the same inputs give the same plan, the second time from what the engine
    // kept (scores, measures, models), and from a new engine that kept nothing.
    SamePlan(plan, engine.Schedule(state, pending, now));
    SamePlan(plan, Engine(options).Schedule(state, pending, now));
    RC_ASSERT(plan.binds.size() + plan.unplaced.size() == pending.size());
    for (const Bind& b : plan.binds) {
      const Job& job = pending[b.pending_index];
      RC_ASSERT(static_cast<std::int64_t>(b.allocation.tasks.size()) == job.task_count());
      Status bind = CheckBind(state, job, b.allocation);
      RC_ASSERT(bind.ok());
    }
    for (const Unplaced& u : plan.unplaced) {
      for (const auto& [id, r] : state.running()) {
        const Job& j = pending[u.pending_index];
        if (r.job.queue == j.queue &&
            state.priority_class(r.job.priority_class).value <
                state.priority_class(j.priority_class).value &&
            state.priority_class(r.job.priority_class).preemptible &&
            state.queue(r.job.queue).spec.preemptable)
          contended = true;
      }
    }
    RC_ASSERT(static_cast<int>(plan.reservations.size()) <= options.backfill.reservations);
    for (const Reservation& r : plan.reservations) {
      RC_ASSERT(r.start >= now);
      bool pending_job = false;
      for (const Unplaced& u : plan.unplaced) pending_job = pending_job || u.job == r.job;
      RC_ASSERT(pending_job);  // a reservation belongs to a job that was not placed
    }
    for (const Eviction& e : plan.evictions) {
      any_eviction = true;
      any_reclaim = any_reclaim || e.kind == Eviction::Kind::kReclaim;
    }
    Status evictions = CheckEvictions(state, plan, pending, options.preemption.max_gpus_per_cycle);
    RC_ASSERT(evictions.ok());
    std::map<JobId, std::pair<QueueId, GpuTypeId>> victim_queues;
    for (const Eviction& e : plan.evictions) {
      const RunningJob* r = state.FindRunning(e.job);
      victim_queues[e.job] = {r->job.queue, r->allocation.gpu_type};
    }
    Status applied = state.Apply(plan, pending);
    RC_ASSERT(applied.ok());
    Status invariants = state.CheckInvariants();
    RC_ASSERT(invariants.ok());
    Status quotas = CheckQuotas(state);
    RC_ASSERT(quotas.ok());
    Status reclaimed = CheckReclaimedQueues(state, plan, victim_queues);
    RC_ASSERT(reclaimed.ok());

    std::set<JobId> bound;
    for (const Bind& b : plan.binds) bound.insert(b.job);
    std::erase_if(pending, [&](const Job& j) { return bound.count(j.id) > 0; });
    // Some running jobs end.
    std::vector<JobId> running;
    for (const auto& [id, r] : state.running()) running.push_back(id);
    std::sort(running.begin(), running.end());
    for (JobId id : running) {
      if (*rc::gen::inRange(0, end_one_in) == 0) RC_ASSERT(state.Unbind(id, now).ok());
    }
    RC_ASSERT(state.CheckInvariants().ok());
  }
  RC_CLASSIFY(any_eviction, "cases with evictions");
  RC_CLASSIFY(contended, "cases where a job waited while lower-priority work of its queue ran");
  RC_CLASSIFY(any_reclaim, "cases with reclaim");
}

RC_GTEST_PROP(EngineProperty, InvariantsHoldAfterEveryCycle, ()) {
  RunRandomCycles(12, 11, 3, false);
}

// Small, busy clusters where jobs seldom end: preemption and reclaim happen often.
RC_GTEST_PROP(EngineProperty, PreemptionKeepsItsPromises, ()) { RunRandomCycles(2, 24, 20, true); }

}  // namespace
}  // namespace arbiter
