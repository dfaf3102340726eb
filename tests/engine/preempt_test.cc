// Preemption and reclaim: who may evict whom, which victims, and the guards against thrashing.
#include <gtest/gtest.h>

#include "core/engine/stages.h"
#include "testing/builders.h"

namespace arbiter {
namespace {

using testing::Add;
using testing::Cluster;
using testing::FindBind;
using testing::FindUnplaced;
using testing::GpuJob;
using testing::MakeState;
using testing::Nodes;
using testing::RunCycle;

constexpr Millis kMinute = 60 * kMillisPerSecond;
constexpr Millis kHour = 60 * kMinute;

// Starts `job` at `start` on the given node's devices [first, first + gpus).
void Start(ClusterState& state, const Job& job, const std::string& node, std::uint32_t first,
           Millis start) {
  testing::StartOn(state, job, node, first, start);
}

Job WithClass(Job job, PriorityClassId c) {
  job.priority_class = c;
  return job;
}

constexpr PriorityClassId kP0 = 0, kP1 = 1, kP2 = 2;

TEST(Preempt, HigherPriorityEvictsLowerWithGraceAndStartsAfterIt) {
  ClusterSpec spec = Cluster();
  Add(spec, Nodes("n", 1, "H800", 8));
  spec.priority_classes[kP2].grace_period = 2 * kMinute;
  spec.priority_classes[kP2].checkpoint_signal = "SIGUSR2";
  ClusterState state = MakeState(spec);
  Start(state, WithClass(GpuJob(1, 1, 8000), kP2), "n-0", 0, 0);
  const Millis now = kHour;
  Plan plan = RunCycle(state, {WithClass(GpuJob(2, 1, 8000), kP0)}, now);
  ASSERT_EQ(plan.evictions.size(), 1u);
  const Eviction& e = plan.evictions[0];
  EXPECT_EQ(e.job, 1u);
  EXPECT_EQ(e.preemptor, 2u);
  EXPECT_EQ(e.kind, Eviction::Kind::kWithinQueue);
  EXPECT_EQ(e.signal, "SIGUSR2");
  EXPECT_EQ(e.signal_at, now);
  EXPECT_EQ(e.stop_at, now + 2 * kMinute);
  EXPECT_NEAR(e.lost_gpu_hours, 8.0, 1e-9);  // 8 GPUs, an hour since it started, no checkpoint
  const Bind* b = FindBind(plan, 2);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->start_after, now + 2 * kMinute);
  EXPECT_EQ(state.FindRunning(1), nullptr);
  EXPECT_EQ(state.EvictionTimes(1).size(), 1u);
  EXPECT_NE(state.FindRunning(2), nullptr);
}

TEST(Preempt, NeverEvictsNonPreemptibleWorkOrEqualPriority) {
  ClusterSpec spec = Cluster();
  Add(spec, Nodes("n", 2, "H800", 8));
  spec.queues.push_back(testing::Queue("serving"));
  spec.queues.back().preemptable = false;
  ClusterState state = MakeState(spec);
  Start(state, WithClass(GpuJob(1, 1, 8000), kP0), "n-0", 0, 0);  // P0 is not preemptible
  Job serving = WithClass(GpuJob(2, 1, 8000), kP2);
  serving.queue = *state.FindQueue("serving");  // P2, but in a queue that is not preemptable
  Start(state, serving, "n-1", 0, 0);
  Plan plan = RunCycle(state, {WithClass(GpuJob(3, 1, 8000), kP0)}, kHour);
  EXPECT_TRUE(plan.evictions.empty());
  EXPECT_NE(FindUnplaced(plan, 3), nullptr);
  // Equal priority never preempts within a queue.
  ClusterSpec spec2 = Cluster();
  Add(spec2, Nodes("n", 1, "H800", 8));
  ClusterState state2 = MakeState(spec2);
  Start(state2, WithClass(GpuJob(1, 1, 8000), kP1), "n-0", 0, 0);
  EXPECT_TRUE(RunCycle(state2, {WithClass(GpuJob(2, 1, 8000), kP1)}, kHour).evictions.empty());
}

TEST(Preempt, MinimumRuntimeProtectsAFreshJob) {
  ClusterSpec spec = Cluster();
  Add(spec, Nodes("n", 1, "H800", 8));
  spec.priority_classes[kP2].min_runtime = 30 * kMinute;
  ClusterState state = MakeState(spec);
  Start(state, WithClass(GpuJob(1, 1, 8000), kP2), "n-0", 0, 0);
  Job high = WithClass(GpuJob(2, 1, 8000), kP0);
  Plan early = RunCycle(state, {high}, 10 * kMinute);
  EXPECT_TRUE(early.evictions.empty());
  // The reason names the guard and when it lifts.
  ASSERT_NE(FindUnplaced(early, 2), nullptr);
  EXPECT_NE(FindUnplaced(early, 2)->reason.Describe().find(
                "no preemption: 1 protected by minimum runtime); expected to lift at 30m00s"),
            std::string::npos)
      << FindUnplaced(early, 2)->reason.Describe();
  Plan later = RunCycle(state, {high}, 30 * kMinute);
  EXPECT_EQ(later.evictions.size(), 1u);
}

// A job the searches meet in several scopes or GPU types' searches counts once in the reason;
// the guards are listed by name.
TEST(Preempt, RefusalsCountEachProtectedJobOnce) {
  engine::PreemptionRefusals refusals;
  refusals.Add(engine::Guard::kMinRuntime, 7);
  refusals.Add(engine::Guard::kMinRuntime, 8);
  refusals.Add(engine::Guard::kStartedAhead, 7);
  refusals.Add(engine::Guard::kMinRuntime, 7);
  EXPECT_EQ(refusals.Describe(),
            "no preemption: 2 protected by minimum runtime, 1 protected by the order, which "
            "started them ahead of it");
}

TEST(Preempt, ChoosesTheVictimThatLosesLeastSinceItsCheckpoint) {
  ClusterSpec spec = Cluster();
  Add(spec, Nodes("n", 2, "H800", 8));
  ClusterState state = MakeState(spec);
  Start(state, WithClass(GpuJob(1, 1, 8000), kP2), "n-0", 0, 0);
  Start(state, WithClass(GpuJob(2, 1, 8000), kP2), "n-1", 0, 0);
  ASSERT_TRUE(state.RecordCheckpoint(1, 20 * kMinute).ok());  // lost 4 hours at 4h+20m
  ASSERT_TRUE(state.RecordCheckpoint(2, 4 * kHour).ok());     // lost 20 minutes
  Plan plan = RunCycle(state, {WithClass(GpuJob(3, 1, 8000), kP0)}, 4 * kHour + 20 * kMinute);
  ASSERT_EQ(plan.evictions.size(), 1u);
  EXPECT_EQ(plan.evictions[0].job, 2u);
  EXPECT_NEAR(plan.evictions[0].lost_gpu_hours, 8.0 / 3, 1e-9);
}

TEST(Preempt, RestartOverheadCountsAsLostWork) {
  ClusterSpec spec = Cluster();
  Add(spec, Nodes("n", 2, "H800", 8));
  ClusterState state = MakeState(spec);
  Job slow_restart = WithClass(GpuJob(1, 1, 8000), kP2);
  slow_restart.restart_overhead = 2 * kHour;
  Start(state, slow_restart, "n-0", 0, 0);
  Start(state, WithClass(GpuJob(2, 1, 8000), kP2), "n-1", 0, 0);
  Plan plan = RunCycle(state, {WithClass(GpuJob(3, 1, 8000), kP0)}, kHour);
  ASSERT_EQ(plan.evictions.size(), 1u);
  EXPECT_EQ(plan.evictions[0].job, 2u);
}

TEST(Preempt, EvictsOnlyWhatThePreemptorNeeds) {
  ClusterSpec spec = Cluster();
  Add(spec, Nodes("n", 1, "H800", 8));
  ClusterState state = MakeState(spec);
  for (JobId id = 1; id <= 8; ++id) {
    Start(state, WithClass(GpuJob(id, 1, 1000), kP2), "n-0", static_cast<std::uint32_t>(id - 1),
          static_cast<Millis>(id) * kMinute);
  }
  // Two GPUs: the two that lose least are the two started last.
  Plan plan = RunCycle(state, {WithClass(GpuJob(100, 1, 2000), kP0)}, kHour);
  ASSERT_EQ(plan.evictions.size(), 2u);
  std::vector<JobId> victims = {plan.evictions[0].job, plan.evictions[1].job};
  std::sort(victims.begin(), victims.end());
  EXPECT_EQ(victims, (std::vector<JobId>{7, 8}));
  EXPECT_EQ(state.running().size(), 7u);
}

TEST(Preempt, NothingIsEvictedUnlessThePreemptorThenFits) {
  ClusterSpec spec = Cluster({"leaf"});
  Add(spec, Nodes("a", 1, "H800", 8, 0, {"leaf-a"}));
  Add(spec, Nodes("b", 1, "H800", 8, 0, {"leaf-b"}));
  ClusterState state = MakeState(spec);
  Start(state, WithClass(GpuJob(1, 1, 8000), kP2), "a-0", 0, 0);
  Start(state, WithClass(GpuJob(2, 1, 8000), kP0), "b-0", 0, 0);  // not preemptible
  // 16 GPUs in one leaf: evicting job 1 would free 8, never enough.
  Job gang = WithClass(GpuJob(3, 2, 8000), kP0);
  gang.topology = {state.topology().LevelIndex("leaf"), ConstraintMode::kRequired};
  Plan plan = RunCycle(state, {gang}, kHour);
  EXPECT_TRUE(plan.evictions.empty());
  EXPECT_NE(FindUnplaced(plan, 3), nullptr);
  EXPECT_NE(state.FindRunning(1), nullptr);
}

TEST(Preempt, GangVictimsFreeAWholeDomainForARequiredTopology) {
  ClusterSpec spec = Cluster({"leaf"});
  Add(spec, Nodes("a", 2, "H800", 8, 0, {"leaf-a"}));
  Add(spec, Nodes("b", 2, "H800", 8, 0, {"leaf-b"}));
  ClusterState state = MakeState(spec);
  Start(state, WithClass(GpuJob(1, 1, 8000), kP2), "a-0", 0, 0);
  Start(state, WithClass(GpuJob(2, 1, 8000), kP2), "a-1", 0, 0);
  Start(state, WithClass(GpuJob(3, 1, 8000), kP2), "b-0", 0, 0);
  Start(state, WithClass(GpuJob(4, 1, 8000), kP0), "b-1", 0, 0);
  ASSERT_TRUE(state.RecordCheckpoint(3, kHour).ok());  // b-0's job loses nothing
  Job gang = WithClass(GpuJob(10, 2, 8000), kP0);
  gang.topology = {state.topology().LevelIndex("leaf"), ConstraintMode::kRequired};
  Plan plan = RunCycle(state, {gang}, kHour);
  // leaf-b would be cheaper per victim, but its P0 job cannot go: leaf-a's two jobs are evicted.
  ASSERT_EQ(plan.evictions.size(), 2u);
  std::vector<JobId> victims = {plan.evictions[0].job, plan.evictions[1].job};
  std::sort(victims.begin(), victims.end());
  EXPECT_EQ(victims, (std::vector<JobId>{1, 2}));
}

TEST(Preempt, CapOnGpusEvictedPerCycle) {
  ClusterSpec spec = Cluster();
  Add(spec, Nodes("n", 3, "H800", 8));
  ClusterState state = MakeState(spec);
  for (JobId id = 1; id <= 3; ++id)
    Start(state, WithClass(GpuJob(id, 1, 8000), kP2), "n-" + std::to_string(id - 1), 0, 0);
  std::vector<Job> high;
  for (JobId id = 10; id <= 12; ++id) high.push_back(WithClass(GpuJob(id, 1, 8000), kP0));
  EngineOptions options;
  options.preemption.max_gpus_per_cycle = 8000;
  Plan plan = RunCycle(state, high, kHour, options);
  EXPECT_EQ(plan.evictions.size(), 1u);
  EXPECT_EQ(plan.binds.size(), 1u);
  Plan next = RunCycle(state, {high[1], high[2]}, kHour + kMinute, options);
  EXPECT_EQ(next.evictions.size(), 1u);  // one more per cycle
}

TEST(Preempt, EvictionBudgetAndCooldownStopRepeatedEvictions) {
  ClusterSpec spec = Cluster();
  Add(spec, Nodes("n", 1, "H800", 8));
  spec.priority_classes[kP2].max_evictions = 2;
  spec.priority_classes[kP2].eviction_window = 24 * kHour;
  spec.priority_classes[kP2].eviction_cooldown = 30 * kMinute;
  ClusterState state = MakeState(spec);
  const Job training = WithClass(GpuJob(1, 1, 8000), kP2);
  Millis t = 0;
  int evictions = 0;
  // A P0 task arrives every 10 minutes, runs 5; the training job restarts whenever it can.
  for (JobId id = 100; id < 100 + 36; ++id, t += 10 * kMinute) {
    if (!state.FindRunning(1)) {
      Plan restart = RunCycle(state, {training}, t);
      (void)restart;
    }
    Plan plan = RunCycle(state, {WithClass(GpuJob(id, 1, 1000), kP0)}, t + kMinute);
    evictions += static_cast<int>(plan.evictions.size());
    if (state.FindRunning(id)) {
      ASSERT_TRUE(state.Unbind(id, t + 6 * kMinute).ok());
    }
  }
  // Six hours: without guards, 36 evictions. Cooldown spaces them, the budget caps them at 2 a day.
  EXPECT_EQ(evictions, 2);
  EXPECT_EQ(state.EvictionTimes(1).size(), 2u);
  EXPECT_GE(state.EvictionTimes(1)[1] - state.EvictionTimes(1)[0], 30 * kMinute);
}

TEST(Preempt, MinimumBenefitKeepsABigJobFromDyingForASmallOne) {
  ClusterSpec spec = Cluster();
  Add(spec, Nodes("n", 1, "H800", 8));
  ClusterState state = MakeState(spec);
  Start(state, WithClass(GpuJob(1, 1, 8000), kP2), "n-0", 0, 0);
  ASSERT_TRUE(
      state.RecordCheckpoint(1, 90 * kMinute).ok());  // at 2h it loses 8 x 0.5 = 4 GPU-hours
  EngineOptions options;
  options.preemption.max_loss_per_gpu = kHour;  // at most one GPU-hour lost per GPU gained
  Plan small = RunCycle(state, {WithClass(GpuJob(2, 1, 1000), kP0)}, 2 * kHour, options);
  EXPECT_TRUE(small.evictions.empty());  // 4 GPU-hours for 1 GPU
  EXPECT_NE(FindUnplaced(small, 2)->reason.Describe().find(
                "victims would lose more than max_loss_per_gpu"),
            std::string::npos);
  Plan big = RunCycle(state, {WithClass(GpuJob(3, 1, 8000), kP0)}, 2 * kHour, options);
  EXPECT_EQ(big.evictions.size(), 1u);  // 0.5 GPU-hours per GPU
}

ClusterSpec Cohort(std::int64_t a_nominal, std::int64_t b_nominal) {
  ClusterSpec spec = Cluster();
  Add(spec, Nodes("n", 2, "H800", 8));
  spec.queues = {testing::Queue("org"), testing::Queue("a", "org"), testing::Queue("b", "org")};
  spec.queues[1].quota["H800"].nominal = MilliGpu(a_nominal * kMilliPerGpu);
  spec.queues[2].quota["H800"].nominal = MilliGpu(b_nominal * kMilliPerGpu);
  return spec;
}

TEST(Reclaim, QueueBelowItsGuaranteeTakesBackBorrowedGpusLowestPriorityFirst) {
  ClusterState state = MakeState(Cohort(8, 8));
  const QueueId a = *state.FindQueue("a");
  const QueueId b = *state.FindQueue("b");
  // a runs 16 one-GPU jobs: 8 on its own quota, 8 borrowed from b. The later ones are P1.
  std::vector<Job> jobs;
  for (JobId id = 1; id <= 16; ++id) {
    Job j = WithClass(GpuJob(id, 1, 1000), id <= 12 ? kP2 : kP1);
    j.queue = a;
    j.submit_time = static_cast<Millis>(id);
    jobs.push_back(j);
  }
  RunCycle(state, jobs, kMinute);
  ASSERT_EQ(state.usage(a, 0), 16000);
  // b asks for 3 GPUs, P2 itself: reclaim does not look at the preemptor's priority.
  Job claim = WithClass(GpuJob(100, 1, 3000), kP2);
  claim.queue = b;
  Plan plan = RunCycle(state, {claim}, kHour);
  ASSERT_NE(FindBind(plan, 100), nullptr);
  ASSERT_EQ(plan.evictions.size(), 3u);
  for (const Eviction& e : plan.evictions) {
    EXPECT_EQ(e.kind, Eviction::Kind::kReclaim);
    EXPECT_LE(e.job, 12u) << "a P1 job was evicted while P2 ones were borrowing";
  }
  EXPECT_EQ(state.usage(a, 0), 13000);
}

TEST(Reclaim, NeverTakesAQueueBelowItsGuarantee) {
  ClusterState state = MakeState(Cohort(12, 4));
  const QueueId a = *state.FindQueue("a");
  const QueueId b = *state.FindQueue("b");
  RunCycle(state, testing::OneGpuJobs(state, "a", 1, 14, kP2), 0);  // a: 12 own + 2 borrowed
  Job claim = WithClass(GpuJob(100, 1, 4000), kP2);
  claim.queue = b;
  Plan plan = RunCycle(state, {claim}, kHour);
  // b's guarantee is 4, free capacity 2: two borrowed GPUs come back, a keeps its 12.
  ASSERT_NE(FindBind(plan, 100), nullptr);
  EXPECT_EQ(plan.evictions.size(), 2u);
  EXPECT_EQ(state.usage(a, 0), 12000);
  // And a cannot reclaim back: it is at its guarantee, b within its own.
  Job back = WithClass(GpuJob(200, 1, 1000), kP0);
  back.queue = a;
  Plan plan2 = RunCycle(state, {back}, 2 * kHour);
  EXPECT_TRUE(plan2.evictions.empty() || plan2.evictions[0].kind == Eviction::Kind::kWithinQueue);
  for (const Eviction& e : plan2.evictions) EXPECT_NE(e.job, 100u);
}

TEST(Reclaim, ABorrowingQueueCannotReclaim) {
  ClusterState state = MakeState(Cohort(8, 8));
  const QueueId a = *state.FindQueue("a");
  std::vector<Job> jobs = testing::OneGpuJobs(state, "b", 1, 8, kP2);
  for (const Job& j : testing::OneGpuJobs(state, "a", 9, 8, kP2)) jobs.push_back(j);
  RunCycle(state, jobs, 0);  // both at their nominal 8: nobody borrows
  Job more = WithClass(GpuJob(100, 1, 1000), kP0);
  more.queue = a;  // would borrow: a P0 job may only preempt within its own queue
  Plan plan = RunCycle(state, {more}, kHour);
  ASSERT_EQ(plan.evictions.size(), 1u);
  EXPECT_EQ(plan.evictions[0].kind, Eviction::Kind::kWithinQueue);
  EXPECT_GE(plan.evictions[0].job, 9u);
}

// Issue 42, defect 4: a borrowing preemptor of a higher-priority queue and a job within its
// queue's guarantee both want the one borrowed job. The reclaimer goes first (guaranteed work
// before borrowing work, in the preemption stage as in placement): one eviction, not two.
TEST(Reclaim, AJobWithinItsGuaranteeReclaimsBeforeABorrowingPreemptor) {
  ClusterSpec spec = Cluster();
  Add(spec, Nodes("h", 2, "H800", 8));
  spec.queues = {testing::Queue("org"), testing::Queue("x", "org"), testing::Queue("y", "org"),
                 testing::Queue("lo", "org"), testing::Queue("hi", "org")};
  spec.queues[1].quota["H800"].nominal = MilliGpu(8000);
  spec.queues[2].quota["H800"].nominal = MilliGpu(8000);
  spec.queues[3].quota["H800"].nominal = MilliGpu(0);
  spec.queues[4].quota["H800"].nominal = MilliGpu(0);
  spec.queues[4].quota["H800"].max = MilliGpu(8000);
  spec.queues[4].priority = 10;
  spec.queues[4].preempt_lower_priority = true;
  ClusterState state = MakeState(spec);
  Job y = WithClass(GpuJob(1, 1, 8000), kP2);
  y.queue = *state.FindQueue("y");
  Start(state, y, "h-0", 0, 0);
  Job lo = WithClass(GpuJob(2, 1, 8000), kP2);
  lo.queue = *state.FindQueue("lo");
  Start(state, lo, "h-1", 0, 0);
  Job hi = WithClass(GpuJob(10, 1, 8000), kP1);  // first in the order: its queue's priority
  hi.queue = *state.FindQueue("hi");
  Job x = WithClass(GpuJob(11, 1, 8000), kP2);
  x.queue = *state.FindQueue("x");
  Plan plan = RunCycle(state, {hi, x}, kHour);
  ASSERT_EQ(plan.evictions.size(), 1u);
  EXPECT_EQ(plan.evictions[0].job, 2u);
  EXPECT_EQ(plan.evictions[0].preemptor, 11u);
  EXPECT_EQ(plan.evictions[0].kind, Eviction::Kind::kReclaim);
  EXPECT_EQ(FindBind(plan, 10), nullptr);
  // The next cycle takes nothing back from the reclaimer.
  Plan next = RunCycle(state, {hi}, kHour + kMinute);
  EXPECT_TRUE(next.evictions.empty());
}

// Queues in priority tiers (Slurm's partition_prio): serving may evict training in another queue,
// but only work above the training queue's guarantee, and never the other way round.
ClusterSpec Tiers(std::int64_t training_nominal = 0, std::int64_t serving_nominal = 0) {
  ClusterSpec spec = Cluster();
  Add(spec, Nodes("n", 2, "H800", 8));
  spec.queues = {testing::Queue("org"), testing::Queue("serving", "org"),
                 testing::Queue("training", "org")};
  spec.queues[1].priority = 100;
  spec.queues[1].preempt_lower_priority = true;
  spec.queues[2].priority = 10;
  spec.queues[2].preempt_lower_priority = true;
  if (training_nominal > 0) {
    spec.queues[2].quota["H800"].nominal = MilliGpu(training_nominal * kMilliPerGpu);
    spec.queues[1].quota["H800"].nominal = MilliGpu(serving_nominal * kMilliPerGpu);
  }
  return spec;
}

TEST(QueuePriority, HigherQueueEvictsLowerQueueWhateverTheClasses) {
  ClusterState state = MakeState(Tiers());
  // Training fills the cluster with P1 jobs; a P2 serving job evicts them: the queue's tier
  // decides, not the class.
  RunCycle(state, testing::OneGpuJobs(state, "training", 1, 16, kP1), 0);
  Job serve = WithClass(GpuJob(100, 1, 2000), kP2);
  serve.queue = *state.FindQueue("serving");
  Plan plan = RunCycle(state, {serve}, kHour);
  ASSERT_NE(FindBind(plan, 100), nullptr);
  ASSERT_EQ(plan.evictions.size(), 2u);
  for (const Eviction& e : plan.evictions) EXPECT_EQ(e.kind, Eviction::Kind::kQueuePriority);

  // The lower tier cannot take them back.
  Job train = WithClass(GpuJob(200, 1, 1000), kP1);
  train.queue = *state.FindQueue("training");
  Plan back = RunCycle(state, {train}, 2 * kHour);
  EXPECT_TRUE(back.evictions.empty());
  EXPECT_EQ(FindBind(back, 200), nullptr);
}

TEST(QueuePriority, NeverTakesTheLowerQueueBelowItsGuarantee) {
  // Training is guaranteed 14 GPUs, serving 4 (of 16: a deliberately overcommitted tree).
  ClusterState state = MakeState(Tiers(14, 4));
  const QueueId training = *state.FindQueue("training");
  RunCycle(state, testing::OneGpuJobs(state, "training", 1, 16, kP2), 0);  // 14 own + 2 beyond
  Job serve = WithClass(GpuJob(100, 1, 4000), kP0);
  serve.queue = *state.FindQueue("serving");
  Plan plan = RunCycle(state, {serve}, kHour);
  // Only the two GPUs beyond training's guarantee may be taken: not enough for four.
  EXPECT_EQ(FindBind(plan, 100), nullptr);
  EXPECT_TRUE(plan.evictions.empty());
  Job small = WithClass(GpuJob(101, 1, 2000), kP0);
  small.queue = *state.FindQueue("serving");
  Plan fits = RunCycle(state, {small}, kHour);
  ASSERT_NE(FindBind(fits, 101), nullptr);
  ASSERT_EQ(fits.evictions.size(), 2u);
  for (const Eviction& e : fits.evictions) EXPECT_EQ(e.kind, Eviction::Kind::kQueuePriority);
  EXPECT_EQ(state.usage(training, 0), 14000);
}

// Issue 42, item 3. A tree above its nominal quota is the rule at work: a queue within its
// guarantee is never refused by quota (Quota.WithinNominalIsNeverRefusedByQuota), so it takes its
// guarantee back from free capacity while a sibling keeps what it borrowed. A preemptor that would
// borrow is then refused by the tree's quota, and evicting the sibling's borrowed work cannot
// change that. Its reason must not count the sibling's jobs of another GPU model as "protected by
// their queue's guarantee": they could never make room for it.
TEST(QueuePriority, JobsOfAnotherModelAreNotCountedAsProtected) {
  ClusterSpec spec = Cluster();
  Add(spec, Nodes("h", 2, "H800", 8));
  Add(spec, Nodes("a", 1, "A100", 8));
  spec.queues = {testing::Queue("org"), testing::Queue("hi", "org"), testing::Queue("lo", "org")};
  spec.queues[1].priority = 10;
  spec.queues[1].preempt_lower_priority = true;
  spec.queues[1].quota["H800"].nominal = MilliGpu(4000);
  spec.queues[2].quota["H800"].nominal = MilliGpu(8000);
  spec.queues[2].quota["A100"].nominal = MilliGpu(8000);
  ClusterState state = MakeState(spec);
  const GpuTypeId h800 = *state.FindGpuType("H800");
  const GpuTypeId a100 = *state.FindGpuType("A100");
  const QueueId org = *state.FindQueue("org");
  auto job = [&](JobId id, const char* queue, GpuTypeId type, std::int64_t milli,
                 PriorityClassId c) {
    Job j = WithClass(GpuJob(id, 1, milli), c);
    j.queue = *state.FindQueue(queue);
    j.gpu_types.Add(type);
    j.submit_time = static_cast<Millis>(id);
    return j;
  };
  std::vector<Job> lo;
  for (JobId id = 1; id <= 3; ++id) lo.push_back(job(id, "lo", h800, 4000, kP2));
  for (JobId id = 11; id <= 18; ++id) lo.push_back(job(id, "lo", a100, 1000, kP2));
  ASSERT_EQ(RunCycle(state, lo, 0).binds.size(), 11u);  // lo borrows 4 H800 of hi's idle 4
  // hi takes its guarantee back from free capacity: the tree runs 16 H800 of its 12.
  ASSERT_NE(FindBind(RunCycle(state, {job(20, "hi", h800, 4000, kP0)}, kMinute), 20), nullptr);
  EXPECT_EQ(state.usage(org, 1 + h800), 16000);
  EXPECT_EQ(state.quota(org, 1 + h800).nominal, 12000);
  // Four more would borrow 4 where nothing is left to lend, even with lo's borrowed job gone.
  Plan plan = RunCycle(state, {job(21, "hi", h800, 4000, kP0)}, kHour);
  EXPECT_TRUE(plan.evictions.empty());
  const Unplaced* u = FindUnplaced(plan, 21);
  ASSERT_NE(u, nullptr);
  EXPECT_EQ(u->reason.cause, Cause::kQuotaCohort);
  EXPECT_EQ(u->reason.Describe().find("protected by their queue's guarantee"), std::string::npos)
      << u->reason.Describe();
}

// Quota of all models together binds the preemptor: work of another model is still a victim
// (evicting it frees that quota).
TEST(Preempt, AJobOfAnotherModelIsEvictedForQuotaOfAllModels) {
  ClusterSpec spec = Cluster();
  Add(spec, Nodes("h", 1, "H800", 8));
  Add(spec, Nodes("a", 1, "A100", 8));
  spec.queues[0].quota["gpu"].max = MilliGpu(8000);
  ClusterState state = MakeState(spec);
  const GpuTypeId h800 = *state.FindGpuType("H800");
  const GpuTypeId a100 = *state.FindGpuType("A100");
  Job serve = WithClass(GpuJob(1, 1, 4000), kP0);  // not preemptible
  serve.gpu_types.Add(h800);
  Job batch = WithClass(GpuJob(2, 1, 4000), kP2);
  batch.gpu_types.Add(a100);
  ASSERT_EQ(RunCycle(state, {serve, batch}, 0).binds.size(), 2u);
  Job more = WithClass(GpuJob(3, 1, 4000), kP0);  // 12 of the 8 all models may use
  more.gpu_types.Add(h800);
  Plan plan = RunCycle(state, {more}, kHour);
  ASSERT_NE(FindBind(plan, 3), nullptr);
  ASSERT_EQ(plan.evictions.size(), 1u);
  EXPECT_EQ(plan.evictions[0].job, 2u);
}

TEST(QueuePriority, OffByDefault) {
  ClusterSpec spec = Tiers();
  spec.queues[1].preempt_lower_priority = false;
  ClusterState state = MakeState(spec);
  RunCycle(state, testing::OneGpuJobs(state, "training", 1, 16, kP2), 0);
  Job serve = WithClass(GpuJob(100, 1, 1000), kP0);
  serve.queue = *state.FindQueue("serving");
  Plan plan = RunCycle(state, {serve}, kHour);
  EXPECT_TRUE(plan.evictions.empty());
  EXPECT_EQ(FindBind(plan, 100), nullptr);
}

}  // namespace
}  // namespace arbiter
