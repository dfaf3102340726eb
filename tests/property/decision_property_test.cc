// Properties of decisions over random clusters and job streams run for many cycles, with evicted
// jobs requeued: (1) no job is evicted by a job the order put behind it in the cycle it started
// (the one rule of who may evict whom, docs/design/engine.md "Preemption"), and every evicted job
// had run its class's minimum runtime; (2) a job explained `never` never starts later under the
// same configuration.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <map>
#include <set>

#include "arbiter/engine.h"
#include "core/engine/stages.h"
#include "testing/builders.h"

namespace arbiter {
namespace {

const char* const kTypes[] = {"H800", "A100", "L40S"};

// A small cluster of two or three GPU types, leaves of a rack level, one queue tree with quota on
// some types (borrowing limits and max among them), classes with and without minimum runtimes.
ClusterSpec RandomCluster() {
  ClusterSpec spec = testing::Cluster({"leaf"});
  const int nodes = *rc::gen::inRange(2, 7);
  for (int i = 0; i < nodes; ++i) {
    const int gpus = *rc::gen::element(2, 4, 8);
    const char* type = kTypes[*rc::gen::inRange(0, 3)];
    auto n = testing::Nodes("n" + std::to_string(i), 1, type, gpus, 0,
                            {"leaf-" + std::to_string(i % 2)});
    if (*rc::gen::inRange(0, 6) == 0)
      n[0].taints.push_back({"dedicated", "x", TaintEffect::kNoSchedule});
    spec.nodes.push_back(n[0]);
  }
  spec.queues = {testing::Queue("org"), testing::Queue("a", "org"), testing::Queue("b", "org")};
  spec.queues[2].priority = *rc::gen::element(0, 10);
  spec.queues[2].preempt_lower_priority = *rc::gen::arbitrary<bool>();
  spec.queues[1].reclaim = spec.queues[2].reclaim = *rc::gen::arbitrary<bool>();
  for (PriorityClassSpec& pc : spec.priority_classes) {
    pc.min_runtime = *rc::gen::element<Millis>(0, 60000, 300000);
    pc.grace_period = 0;  // a preemptor starts at its cycle: "when it started" is that cycle
  }
  for (int q = 1; q <= 2; ++q) {
    if (*rc::gen::inRange(0, 3) == 0) continue;
    QuotaSpec quota;
    quota.nominal = MilliGpu(*rc::gen::inRange(0, 9) * 1000);
    if (*rc::gen::arbitrary<bool>())
      quota.borrowing_limit = MilliGpu(*rc::gen::inRange(0, 5) * 1000);
    if (*rc::gen::arbitrary<bool>()) quota.max = MilliGpu(*rc::gen::inRange(0, 17) * 1000);
    const std::string resource =
        *rc::gen::arbitrary<bool>() ? std::string("gpu") : spec.nodes[0].devices[0].type;
    spec.queues[static_cast<std::size_t>(q)].quota[resource] = quota;
  }
  return spec;
}

Job RandomJob(const ClusterState& state, JobId id, Millis now) {
  const int tasks = *rc::gen::element(1, 1, 1, 2);
  Job job =
      testing::GpuJob(id, tasks, *rc::gen::element<std::int64_t>(500, 1000, 2000, 4000, 8000));
  job.queue = *rc::gen::element(*state.FindQueue("a"), *state.FindQueue("b"));
  job.priority_class = *rc::gen::inRange<PriorityClassId>(0, 3);
  job.submit_time = now - *rc::gen::inRange<Millis>(0, 3600000);
  job.runtime_estimate = *rc::gen::element<Millis>(0, 600000, 7200000);
  for (GpuTypeId t = 0; t < state.gpu_type_count(); ++t) {
    if (*rc::gen::inRange(0, 3) == 0) job.gpu_types.Add(t);
  }
  if (tasks > 1 && *rc::gen::inRange(0, 3) == 0) {
    job.topology.level = *rc::gen::inRange(0, static_cast<int>(state.topology().levels.size()));
    job.topology.mode = ConstraintMode::kRequired;
  }
  if (*rc::gen::inRange(0, 5) == 0)
    job.tolerations.push_back({"dedicated", Toleration::Op::kExists, "", std::nullopt});
  return job;
}

void RunCycles() {
  const ClusterSpec spec = RandomCluster();
  Result<ClusterState> created = ClusterState::Create(spec);
  RC_ASSERT(created.ok());
  ClusterState& state = created.value();
  EngineOptions options;
  // Aging strong enough to lift a lower class above a higher one.
  options.ordering.age = *rc::gen::element(0.0, 1000.0, 9500.0, 20000.0);
  options.ordering.max_age = *rc::gen::element<Millis>(600000, 3600000);
  options.ordering.starvation_wait = *rc::gen::element<Millis>(0, 0, 1200000);
  // Fair share moves the keys of jobs of different queues between a victim's start and its
  // eviction (the rule reads today's): the property is exact within a queue, or without it.
  options.ordering.fair_share = *rc::gen::element(0.0, 2000.0);
  options.preemption.max_gpus_per_cycle = *rc::gen::element<std::int64_t>(-1, 2000, 8000);
  options.backfill.reservations = *rc::gen::inRange(0, 2);
  Engine engine(options);

  JobId next_id = 1;
  std::vector<Job> pending;
  // Per running job: the jobs the cycle that started it ordered behind it.
  std::map<JobId, std::set<JobId>> behind;
  std::map<JobId, std::string> never;  // job -> the reason that said never
  const int cycles = *rc::gen::inRange(5, 25);
  Millis now = 0;
  for (int cycle = 0; cycle < cycles; ++cycle) {
    now += *rc::gen::element<Millis>(30000, 60000, 300000);
    const int arrivals = *rc::gen::inRange(0, 6);
    for (int i = 0; i < arrivals; ++i) pending.push_back(RandomJob(state, next_id++, now));

    const Plan plan = engine.Schedule(state, pending, now);
    Status lawful = CheckPlan(state, pending, plan);
    RC_ASSERT(lawful.ok());
    // (1) Evictions against the order of the cycles their victims started in.
    for (const Eviction& e : plan.evictions) {
      const RunningJob* victim = state.FindRunning(e.job);
      RC_ASSERT(victim != nullptr);
      const PriorityClassSpec& pc = state.priority_class(victim->job.priority_class);
      RC_ASSERT(now - victim->start_time >= pc.min_runtime);
      if (e.kind == Eviction::Kind::kReclaim) continue;  // guarantees come first: documented
      if (e.kind == Eviction::Kind::kQueuePriority && options.ordering.fair_share > 0) continue;
      if (behind[e.job].count(e.preemptor)) {
        RC_FAIL("job " + std::to_string(e.job) + " evicted by job " + std::to_string(e.preemptor) +
                " (kind " + std::to_string(static_cast<int>(e.kind)) +
                "), which the order put behind it when it started");
      }
    }
    // (2) A job explained `never` does not start later.
    for (const Bind& b : plan.binds) {
      if (auto it = never.find(b.job); it != never.end())
        RC_FAIL("job " + std::to_string(b.job) + " was explained '" + it->second +
                "' and started at " + FormatDuration(now));
    }
    for (const Unplaced& u : plan.unplaced) {
      if (u.reason.verdict == Verdict::kNever) never.emplace(u.job, u.reason.Describe());
    }

    const std::vector<std::uint32_t> order =
        engine::OrderPending(state, pending, now, options.ordering);
    std::map<JobId, std::size_t> rank;
    for (std::size_t i = 0; i < order.size(); ++i) rank[pending[order[i]].id] = i;
    std::vector<Job> requeued;
    for (const Eviction& e : plan.evictions) requeued.push_back(state.FindRunning(e.job)->job);
    RC_ASSERT(state.Apply(plan, pending).ok());
    std::set<JobId> bound;
    for (const Bind& b : plan.binds) {
      bound.insert(b.job);
      std::set<JobId>& after = behind[b.job];
      after.clear();
      for (const Job& j : pending) {
        if (rank[j.id] > rank[b.job]) after.insert(j.id);
      }
    }
    std::erase_if(pending, [&](const Job& j) { return bound.count(j.id) > 0; });
    for (Job& j : requeued) pending.push_back(std::move(j));
    // Some running jobs end.
    std::vector<JobId> ending;
    for (const auto& [id, r] : state.running()) {
      if (*rc::gen::inRange(0, 6) == 0) ending.push_back(id);
    }
    for (JobId id : ending) RC_ASSERT(state.Unbind(id, now).ok());
  }
}

// Five random runs per case (500 in all): the wrong `never` and the eviction against the order
// each needed tens of cases to appear.
RC_GTEST_PROP(DecisionProperty, EvictionsFollowTheOrderAndNeverIsTrue, ()) {
  for (int run = 0; run < 5; ++run) RunCycles();
}

}  // namespace
}  // namespace arbiter
