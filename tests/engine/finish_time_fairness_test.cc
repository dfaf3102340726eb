// Finish-time fairness (scheduler.ordering.policy ftf, Themis's rho): the rho of a waiting job,
// the order it gives, its evictions (Themis's leases), and a waiting plan that promises nothing
// (rho grows with the wait).
#include <gtest/gtest.h>

#include "arbiter/engine.h"
#include "core/engine/stages.h"
#include "testing/builders.h"

namespace arbiter {
namespace {

using testing::Add;
using testing::GpuJob;
using testing::MakeState;
using testing::Nodes;

constexpr Millis kSecond = kMillisPerSecond;
constexpr Millis kMinute = 60 * kSecond;
constexpr Millis kHour = 3600 * kSecond;

ClusterSpec TwoTeams() {
  ClusterSpec spec = testing::Cluster();
  Add(spec, Nodes("n", 1, "H800", 8));
  spec.queues = {testing::Queue("a"), testing::Queue("b")};
  return spec;
}

Job In(const ClusterState& state, const char* queue, JobId id, std::int64_t gpus, Millis submit,
       Millis estimate) {
  Job j = GpuJob(id, 1, gpus * 1000);
  j.queue = *state.FindQueue(queue);
  j.submit_time = submit;
  j.runtime_estimate = estimate;
  return j;
}

OrderingWeights Ftf() {
  OrderingWeights w;
  w.policy = OrderPolicy::kFinishTimeFairness;
  return w;
}

TEST(FinishTimeFairness, RhoIsTheSharedFinishOverTheFinishAloneOnAFairShare) {
  ClusterState state = MakeState(TwoTeams());
  // 100 s of work on one GPU, submitted at 0, at 50 s: it would finish at 150 s, against 100 s
  // alone.
  Job job = In(state, "a", 1, 1, 0, 100 * kSecond);
  EXPECT_DOUBLE_EQ(FinishTimeFairness(job, 50 * kSecond, 100 * kSecond, 1, 8000), 1.5);
  // Having run 40 s before it was preempted: 60 s remain.
  job.attained = 40 * kSecond;
  EXPECT_DOUBLE_EQ(FinishTimeFairness(job, 50 * kSecond, 100 * kSecond, 1, 8000), 1.1);
  // Four queues share 8 GPUs: a fair share of 2 GPUs holds one GPU as fast, and runs a 4-GPU job
  // half as fast.
  job.attained = 0;
  EXPECT_DOUBLE_EQ(FinishTimeFairness(job, 50 * kSecond, 100 * kSecond, 4, 8000), 1.5);
  Job wide = In(state, "a", 2, 4, 0, 100 * kSecond);
  EXPECT_DOUBLE_EQ(FinishTimeFairness(wide, 50 * kSecond, 100 * kSecond, 4, 8000), 0.75);
  // Not yet submitted, nothing run: exactly its fair finish.
  EXPECT_DOUBLE_EQ(FinishTimeFairness(job, 0, 100 * kSecond, 1, 8000), 1.0);
}

TEST(FinishTimeFairness, TheJobFurthestFromItsFairFinishGoesFirst) {
  ClusterState state = MakeState(TwoTeams());
  // Job 1: ten hours of work, waiting an hour (rho 1.1). Job 2: ten minutes, waiting half an hour
  // (rho 4). The multifactor order takes the older first; finish-time fairness the short one.
  const std::vector<Job> jobs = {In(state, "a", 1, 1, 0, 10 * kHour),
                                 In(state, "a", 2, 1, 30 * kMinute, 10 * kMinute)};
  EXPECT_EQ(engine::OrderPending(state, jobs, kHour, OrderingWeights{}),
            (std::vector<std::uint32_t>{0, 1}));
  EXPECT_EQ(engine::OrderPending(state, jobs, kHour, Ftf()), (std::vector<std::uint32_t>{1, 0}));
}

TEST(FinishTimeFairness, TheFairShareIsTheClusterOverTheQueuesWithWork) {
  ClusterState state = MakeState(TwoTeams());
  // Both an hour of work, submitted together: job 1 on 8 GPUs, job 2 on 4. With one queue active,
  // both would run as fast alone (rho equal, the older id first).
  std::vector<Job> jobs = {In(state, "a", 1, 8, 0, kHour), In(state, "a", 2, 4, 0, kHour)};
  EXPECT_EQ(engine::OrderPending(state, jobs, 10 * kMinute, Ftf()),
            (std::vector<std::uint32_t>{0, 1}));
  // Queue b has work too: a fair share is 4 GPUs, so job 1 alone would take two hours (rho 0.75
  // at 30 minutes) while job 2 still takes one (1.5); job 3 of queue b, an hour on one GPU, waited
  // 10 minutes (7/6).
  jobs.push_back(In(state, "b", 3, 1, 20 * kMinute, kHour));
  EXPECT_EQ(engine::OrderPending(state, jobs, 30 * kMinute, Ftf()),
            (std::vector<std::uint32_t>{1, 2, 0}));
}

TEST(FinishTimeFairness, AJobWithoutAnEstimateCountsTheDefaultRuntime) {
  ClusterState state = MakeState(TwoTeams());
  // Job 1 has no estimate; job 2 has two hours; both waited an hour. With a default of one hour
  // job 1's rho is 2 against 1.5; with a default of four hours, 1.25.
  const std::vector<Job> jobs = {In(state, "a", 1, 1, 0, 0), In(state, "a", 2, 1, 0, 2 * kHour)};
  EXPECT_EQ(engine::OrderPending(state, jobs, kHour, Ftf(), kHour),
            (std::vector<std::uint32_t>{0, 1}));
  EXPECT_EQ(engine::OrderPending(state, jobs, kHour, Ftf(), 4 * kHour),
            (std::vector<std::uint32_t>{1, 0}));
}

TEST(FinishTimeFairness, AJobOfHigherRhoEvictsOnePastItsLease) {
  // Ten hours of work on the whole node, submitted 10 hours before it started at 0: at 20 minutes
  // its rho, running on, is (10h20m + 9h40m) / 10h = 2. (Everything in queue a: no rule evicts
  // across trees, and one queue with work has the whole cluster for its fair share.)
  auto cycle = [](Millis now, Millis work, const EngineOptions& options) {
    ClusterState state = MakeState(TwoTeams());
    testing::StartOn(state, In(state, "a", 1, 8, -10 * kHour, 10 * kHour), "n-0", 0, 0);
    return testing::RunCycle(state, {In(state, "a", 2, 8, 0, work)}, now, options);
  };
  EngineOptions options;
  options.ordering = Ftf();
  // Ten minutes of work submitted at 0: rho 3 at 20 minutes. It evicts the runner.
  const Plan plan = cycle(20 * kMinute, 10 * kMinute, options);
  ASSERT_EQ(plan.evictions.size(), 1u);
  EXPECT_EQ(plan.evictions[0].job, 1u);
  EXPECT_EQ(plan.evictions[0].kind, Eviction::Kind::kFinishTimeFairness);
  EXPECT_STREQ(EvictionKindName(plan.evictions[0].kind), "finish_time_fairness");
  ASSERT_NE(testing::FindBind(plan, 2), nullptr);
  // An hour of work: rho (20m + 1h) / 1h = 4/3, below the runner's 2: it waits.
  EXPECT_TRUE(cycle(20 * kMinute, kHour, options).evictions.empty());
  // Within the runner's lease (10 minutes by default) nothing evicts it, however high the rho.
  EXPECT_TRUE(cycle(5 * kMinute, kMinute, options).evictions.empty());
  options.ordering.ftf_lease = 4 * kMinute;
  EXPECT_EQ(cycle(5 * kMinute, kMinute, options).evictions.size(), 1u);
  // Without preemption the order alone.
  options.preemption.enabled = false;
  EXPECT_TRUE(cycle(20 * kMinute, 10 * kMinute, options).evictions.empty());
}

TEST(FinishTimeFairness, ProtectedClassesAreNotEvicted) {
  ClusterSpec spec = TwoTeams();
  for (PriorityClassSpec& pc : spec.priority_classes) pc.preemptible = false;
  ClusterState state = MakeState(spec);
  testing::StartOn(state, In(state, "a", 1, 8, -10 * kHour, 10 * kHour), "n-0", 0, 0);
  EngineOptions options;
  options.ordering = Ftf();
  EXPECT_TRUE(
      testing::RunCycle(state, {In(state, "a", 2, 8, 0, 10 * kMinute)}, 20 * kMinute, options)
          .evictions.empty());
}

TEST(FinishTimeFairness, AWaitingPlanPromisesNothing) {
  // Two jobs wait behind a full node: their rhos grow at different rates, so the next cycle may
  // order them otherwise at any time.
  ClusterState state = MakeState(TwoTeams());
  Job runner = In(state, "a", 1, 8, 0, kHour);
  testing::StartOn(state, runner, "n-0", 0, 0);
  const std::vector<Job> pending = {In(state, "a", 2, 8, 0, kHour),
                                    In(state, "b", 3, 8, 0, 2 * kHour)};
  EngineOptions options;
  options.backfill.reservations = 0;
  options.preemption.enabled = false;
  options.ordering.age = 0;  // the multifactor key alone would not change
  options.ordering.fair_share = 0;
  EXPECT_GT(Engine(options).Schedule(state, pending, kMinute).stable_until, kMinute);
  options.ordering.policy = OrderPolicy::kFinishTimeFairness;
  EXPECT_EQ(Engine(options).Schedule(state, pending, kMinute).stable_until, kMinute);
}

}  // namespace
}  // namespace arbiter
