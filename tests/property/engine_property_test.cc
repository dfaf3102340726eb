// Properties that hold for every random cluster and job stream: after every cycle the state's
// invariants hold (no device over-allocated, counts and indexes match the allocations), the cycle
// returns the state unchanged, no gang is partly placed, every bind honours the job's request and
// required topology, and no queue exceeds its max or borrowing limit.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <set>

#include "arbiter/engine.h"
#include "testing/builders.h"

namespace arbiter {
namespace {

const char* const kTypes[] = {"H800", "A100", "L40S"};

ClusterSpec RandomCluster() {
  ClusterSpec spec = testing::Cluster({"leaf"});
  const int nodes = *rc::gen::inRange(1, 13);
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

Job RandomJob(const ClusterState& state, JobId id, Millis now) {
  Job job = testing::GpuJob(
      id, *rc::gen::inRange(1, 5),
      *rc::gen::element<std::int64_t>(0, 100, 250, 500, 900, 1000, 2000, 4000, 8000));
  job.queue = *rc::gen::element(*state.FindQueue("a"), *state.FindQueue("b"));
  job.priority_class = *rc::gen::inRange<PriorityClassId>(0, 3);
  job.submit_time = now - *rc::gen::inRange<Millis>(0, 100000);
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
    return Status::Error("job " + std::to_string(job.id) + " spans its required topology level");
  return Status::Ok();
}

Status CheckQuotas(const ClusterState& state) {
  for (QueueId q = 0; q < state.queue_count(); ++q) {
    for (std::size_t r = 0; r < state.quota_resource_count(); ++r) {
      const QuotaLimits& l = state.quota(q, r);
      if (!l.limited) continue;
      const std::int64_t used = state.usage(q, r);
      if (l.max >= 0 && used > l.max) return Status::Error("queue over its max");
      if (l.borrowing_limit >= 0 && used - l.nominal > l.borrowing_limit)
        return Status::Error("queue over its borrowing limit");
    }
  }
  return Status::Ok();
}

RC_GTEST_PROP(EngineProperty, InvariantsHoldAfterEveryCycle, ()) {
  const ClusterSpec spec = RandomCluster();
  Result<ClusterState> created = ClusterState::Create(spec);
  RC_ASSERT(created.ok());
  ClusterState& state = created.value();
  Engine engine;
  JobId next_id = 1;
  std::vector<Job> pending;
  const int cycles = *rc::gen::inRange(1, 6);
  for (int cycle = 0; cycle < cycles; ++cycle) {
    const Millis now = (cycle + 1) * 60000;
    const int arrivals = *rc::gen::inRange(0, 12);
    for (int i = 0; i < arrivals; ++i) pending.push_back(RandomJob(state, next_id++, now));

    Plan plan = engine.Schedule(state, pending, now);
    Status restored = state.CheckInvariants();
    RC_ASSERT(restored.ok());
    // Deterministic: the same inputs give the same plan.
    Plan again = engine.Schedule(state, pending, now);
    RC_ASSERT(again.binds.size() == plan.binds.size());
    for (std::size_t i = 0; i < plan.binds.size(); ++i) {
      RC_ASSERT(again.binds[i].job == plan.binds[i].job);
      for (std::size_t t = 0; t < plan.binds[i].allocation.tasks.size(); ++t) {
        RC_ASSERT(again.binds[i].allocation.tasks[t].node ==
                  plan.binds[i].allocation.tasks[t].node);
      }
    }
    RC_ASSERT(plan.binds.size() + plan.unplaced.size() == pending.size());
    for (const Bind& b : plan.binds) {
      const Job& job = pending[b.pending_index];
      RC_ASSERT(static_cast<std::int64_t>(b.allocation.tasks.size()) == job.task_count());
      Status bind = CheckBind(state, job, b.allocation);
      RC_ASSERT(bind.ok());
    }
    Status applied = state.Apply(plan, pending);
    RC_ASSERT(applied.ok());
    Status invariants = state.CheckInvariants();
    RC_ASSERT(invariants.ok());
    Status quotas = CheckQuotas(state);
    RC_ASSERT(quotas.ok());

    std::set<JobId> bound;
    for (const Bind& b : plan.binds) bound.insert(b.job);
    std::erase_if(pending, [&](const Job& j) { return bound.count(j.id) > 0; });
    // Some running jobs end.
    std::vector<JobId> running;
    for (const auto& [id, r] : state.running()) running.push_back(id);
    std::sort(running.begin(), running.end());
    for (JobId id : running) {
      if (*rc::gen::inRange(0, 3) == 0) RC_ASSERT(state.Unbind(id, now).ok());
    }
    RC_ASSERT(state.CheckInvariants().ok());
  }
}

}  // namespace
}  // namespace arbiter
