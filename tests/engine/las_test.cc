// Least attained service (scheduler.ordering.policy las, las-2d): the service queues from
// Tiresias's thresholds, its starvation promotion, the order, the eviction of jobs of higher
// service queues, and when a waiting plan's inputs change next.
#include "core/engine/las.h"

#include <gtest/gtest.h>

#include "arbiter/engine.h"
#include "core/engine/stages.h"
#include "testing/builders.h"

namespace arbiter {
namespace {

using testing::Add;
using testing::MakeState;
using testing::Nodes;

constexpr Millis kSecond = kMillisPerSecond;

ClusterSpec OneNode() {
  ClusterSpec spec = testing::Cluster();
  Add(spec, Nodes("n", 1, "H800", 8));
  spec.queues = {testing::Queue("org"), testing::Queue("a", "org")};
  return spec;
}

OrderingWeights Las(OrderPolicy policy = OrderPolicy::kLas, double starvation = 0) {
  OrderingWeights w;
  w.policy = policy;
  w.starvation_factor = starvation;
  return w;
}

Job InA(const ClusterState& state, JobId id, std::int64_t gpus, Millis submit, Millis attained) {
  Job j = testing::QueuedJob(state, id, "a", gpus * 1000, submit);
  j.attained = attained;
  j.service_time = submit;
  return j;
}

TEST(Las, QueuesFollowTiresiasThresholdsInTimeOrGpuTime) {
  const OrderingWeights one = Las(OrderPolicy::kLas);
  EXPECT_EQ(one.las_thresholds, (std::vector<Millis>{3250 * kSecond, 7200 * kSecond}));
  EXPECT_EQ(LasQueue(one, 0, 8000), 0);
  EXPECT_EQ(LasQueue(one, 3249 * kSecond, 8000), 0);
  EXPECT_EQ(LasQueue(one, 3250 * kSecond, 1000), 1);
  EXPECT_EQ(LasQueue(one, 7200 * kSecond, 1000), 2);
  // Two dimensions: GPU-time. 8 GPUs for 407 s is 3,256 GPU-seconds: the second queue.
  const OrderingWeights two = Las(OrderPolicy::kLas2d);
  EXPECT_EQ(LasQueue(two, 406 * kSecond, 8000), 0);
  EXPECT_EQ(LasQueue(two, 407 * kSecond, 8000), 1);
  EXPECT_EQ(LasQueue(two, 900 * kSecond, 8000), 2);
  EXPECT_EQ(LasQueue(two, 900 * kSecond, 1000), 0);
}

TEST(Las, LessServedQueuesGoFirstThenTheMultifactorOrder) {
  ClusterState state = MakeState(OneNode());
  // Job 1 came first but has run an hour; job 2 ran 10 minutes; job 3 never ran.
  std::vector<Job> jobs = {InA(state, 1, 1, 0, 3600 * kSecond), InA(state, 2, 1, 5, 600 * kSecond),
                           InA(state, 3, 1, 10, 0)};
  // 1 is in the second queue; 2 and 3 in the first, by age (2 is older).
  EXPECT_EQ(engine::OrderPending(state, jobs, 20 * kSecond, Las()),
            (std::vector<std::uint32_t>{1, 2, 0}));
  // The multifactor order alone: by age.
  EXPECT_EQ(engine::OrderPending(state, jobs, 20 * kSecond, OrderingWeights{}),
            (std::vector<std::uint32_t>{0, 1, 2}));
}

// Tiresias keeps each service queue as a list in which the running jobs stay ahead of the waiting
// ones: a job it stops goes to the head of the waiting ones. So within a queue the jobs that ran
// there come first, the most recently stopped first, then those that have not run there (new or
// promoted), by their entry into the queue.
TEST(Las, WithinAQueueTheJobsThatRanThereGoFirstTheLastStoppedFirst) {
  ClusterState state = MakeState(OneNode());
  // Second queue: A reached it at 19,250 s and stopped at 20,000 s; B reached it later (28,250 s)
  // and stopped later (30,000 s).
  Job a = InA(state, 1, 1, 0, 4000 * kSecond);
  a.service_time = 20'000 * kSecond;
  Job b = InA(state, 2, 1, 1000 * kSecond, 5000 * kSecond);
  b.service_time = 30'000 * kSecond;
  // First queue: C never ran; D, submitted after it, ran 10 minutes and stopped at 25,000 s.
  Job c = InA(state, 3, 1, 100 * kSecond, 0);
  Job d = InA(state, 4, 1, 200 * kSecond, 600 * kSecond);
  d.service_time = 25'000 * kSecond;
  const std::vector<Job> jobs = {a, b, c, d};
  EXPECT_EQ(engine::OrderPending(state, jobs, 40'000 * kSecond, Las()),
            (std::vector<std::uint32_t>{3, 2, 1, 0}));
  EXPECT_EQ(engine::LasLastStop(d, engine::LasQueueEntry(d, 40'000 * kSecond, Las())),
            25'000 * kSecond);
  EXPECT_EQ(engine::LasLastStop(c, engine::LasQueueEntry(c, 40'000 * kSecond, Las())), -1);

  // A promoted job has not run in the first queue since it entered it (its promotion, at
  // 18,000 s): behind D, which ran there, and behind C, which entered first.
  Job e = InA(state, 5, 1, 50 * kSecond, 4000 * kSecond);
  e.service_time = 10'000 * kSecond;
  const std::vector<Job> first = {e, c, d};
  EXPECT_EQ(engine::OrderPending(state, first, 26'000 * kSecond, Las(OrderPolicy::kLas, 2)),
            (std::vector<std::uint32_t>{2, 1, 0}));
}

TEST(Las, StarvationPromotionReturnsAJobToTheFirstQueue) {
  ClusterState state = MakeState(OneNode());
  // Ran 4,000 s (second queue), requeued at 10,000 s with no waiting counted yet; factor 2:
  // promoted once it has waited 8,000 s.
  Job job = InA(state, 1, 1, 0, 4000 * kSecond);
  job.service_time = 10'000 * kSecond;
  const OrderingWeights w = Las(OrderPolicy::kLas, 2);
  EXPECT_EQ(PendingLasQueue(job, 17'999 * kSecond, w), 1);
  EXPECT_EQ(PendingLasQueue(job, 18'000 * kSecond, w), 0);
  const AttainedService s = ServiceAtStart(job, 18'000 * kSecond, w);
  EXPECT_EQ(s.attained, 0);
  EXPECT_EQ(s.starved, 0);
  // Before the promotion the waiting is carried into the next run.
  const AttainedService early = ServiceAtStart(job, 12'000 * kSecond, w);
  EXPECT_EQ(early.attained, 4000 * kSecond);
  EXPECT_EQ(early.starved, 2000 * kSecond);
  // No factor: never promoted.
  EXPECT_EQ(PendingLasQueue(job, 1'000'000 * kSecond, Las()), 1);
}

TEST(Las, AJobOfALowerServiceQueueEvictsOneOfAHigherQueue) {
  ClusterState state = MakeState(OneNode());
  // An 8-GPU job has run 2 hours (second queue by time); a new 8-GPU job arrives.
  testing::StartOn(state, InA(state, 1, 8, 0, 0), "n-0", 0, 0);
  EngineOptions options;
  options.ordering = Las();
  const Millis now = 2 * 3600 * kSecond;
  const Plan plan = testing::RunCycle(state, {InA(state, 2, 8, now, 0)}, now, options);
  ASSERT_EQ(plan.evictions.size(), 1u);
  EXPECT_EQ(plan.evictions[0].job, 1u);
  EXPECT_EQ(plan.evictions[0].kind, Eviction::Kind::kAttainedService);
  ASSERT_NE(testing::FindBind(plan, 2), nullptr);
}

TEST(Las, NoEvictionWithinOneServiceQueue) {
  ClusterState state = MakeState(OneNode());
  testing::StartOn(state, InA(state, 1, 8, 0, 0), "n-0", 0, 0);
  EngineOptions options;
  options.ordering = Las();
  // After 10 minutes the runner is still in the first queue, as is the newcomer.
  const Millis now = 600 * kSecond;
  const Plan plan = testing::RunCycle(state, {InA(state, 2, 8, now, 0)}, now, options);
  EXPECT_TRUE(plan.evictions.empty());
  EXPECT_EQ(testing::FindBind(plan, 2), nullptr);
  // The multifactor order never evicts a job of the same class and queue either.
  EXPECT_TRUE(testing::RunCycle(state, {InA(state, 2, 8, 7200 * kSecond, 0)}, 7200 * kSecond, {})
                  .evictions.empty());
}

TEST(Las, ProtectedClassesAreNotEvicted) {
  ClusterSpec spec = OneNode();
  spec.priority_classes[1].preemptible = false;
  ClusterState state = MakeState(spec);
  testing::StartOn(state, InA(state, 1, 8, 0, 0), "n-0", 0, 0);
  EngineOptions options;
  options.ordering = Las();
  const Millis now = 2 * 3600 * kSecond;
  EXPECT_TRUE(testing::RunCycle(state, {InA(state, 2, 8, now, 0)}, now, options).evictions.empty());
}

TEST(Las, AWaitingPlanHoldsUntilARunnerCrossesAThresholdOrAJobIsPromoted) {
  ClusterState state = MakeState(OneNode());
  // 8 GPUs since time 0, with 100 s attained before: it reaches 3,250 s of service at 3,150 s,
  // 3,250 GPU-seconds (two dimensions) at 3,250 / 8 - 100 = 306.25 s.
  Job runner = InA(state, 1, 8, 0, 100 * kSecond);
  testing::StartOn(state, runner, "n-0", 0, 0);
  EngineOptions options;
  options.ordering = Las();
  options.backfill.reservations = 0;
  const std::vector<Job> pending = {InA(state, 2, 8, 0, 0)};
  EXPECT_EQ(Engine(options).Schedule(state, pending, 10 * kSecond).stable_until, 3150 * kSecond);
  options.ordering = Las(OrderPolicy::kLas2d);
  EXPECT_EQ(Engine(options).Schedule(state, pending, 10 * kSecond).stable_until, 306'250);
  // A waiting job of the second queue, requeued at 50 s after 4,000 s run, factor 1: promoted at
  // 4,050 s (the runner crosses 7,200 GPU-seconds at 800 s first; without preemption it does not
  // matter).
  options.ordering = Las(OrderPolicy::kLas, 1);
  options.preemption.enabled = false;
  std::vector<Job> starving = {InA(state, 3, 8, 0, 4000 * kSecond), InA(state, 4, 8, 1, 0)};
  starving[0].service_time = 50 * kSecond;
  EXPECT_EQ(Engine(options).Schedule(state, starving, 60 * kSecond).stable_until, 4050 * kSecond);
}

// ---- Gittins index (scheduler.ordering.policy gittins) ----

constexpr Millis kGpuHour = 3600 * kSecond;  // GPU-milliseconds of one GPU for an hour

TEST(Gittins, IndexIsTheChanceToEndWithinTheQuantumOverTheServiceSpentInIt) {
  ClusterState state = MakeState(OneNode());
  EXPECT_EQ(state.GittinsIndex(0, 2 * kGpuHour), 0);  // nothing learned yet
  for (Millis s : {kGpuHour, kGpuHour, kGpuHour, 10 * kGpuHour}) state.RecordFinishedService(s, 10);
  EXPECT_EQ(state.finished_service_count(), 4u);
  // A new job: 3 of 4 end within 2 GPU-hours, each after 1; the fourth spends the whole quantum:
  // 3 / (3 + 2) per GPU-hour.
  EXPECT_DOUBLE_EQ(state.GittinsIndex(0, 2 * kGpuHour), 0.6);
  // Half an hour in: the same three end within the quantum after half an hour each.
  EXPECT_DOUBLE_EQ(state.GittinsIndex(kGpuHour / 2, 2 * kGpuHour), 3.0 / 3.5);
  // Past the short ones: only the long one is like it, and it does not end within the quantum.
  EXPECT_EQ(state.GittinsIndex(kGpuHour, 2 * kGpuHour), 0);
  // Past every job learned: 0.
  EXPECT_EQ(state.GittinsIndex(10 * kGpuHour, 2 * kGpuHour), 0);
}

TEST(Gittins, LearnsFromTheLastWindowOfFinishedJobs) {
  ClusterState state = MakeState(OneNode());
  state.RecordFinishedService(10 * kGpuHour, 2);
  state.RecordFinishedService(kGpuHour, 2);
  state.RecordFinishedService(kGpuHour, 2);  // the 10-hour job drops out of the window
  EXPECT_EQ(state.finished_service(), (std::vector<Millis>{kGpuHour, kGpuHour}));
  EXPECT_DOUBLE_EQ(state.GittinsIndex(0, 2 * kGpuHour), 1.0);  // both end after one GPU-hour
  state.RecordFinishedService(3 * kGpuHour, 1);                // a smaller window keeps the newest
  EXPECT_EQ(state.finished_service(), (std::vector<Millis>{3 * kGpuHour}));
}

TEST(Gittins, WithinAServiceQueueTheHigherIndexGoesFirst) {
  ClusterState state = MakeState(OneNode());
  OrderingWeights w = Las(OrderPolicy::kGittins);
  w.las_thresholds = {100 * kGpuHour};  // all in the first queue
  w.gittins_quantum = 2 * kGpuHour;
  // Job 1 came first and has run an hour on one GPU; job 2 never ran.
  std::vector<Job> jobs = {InA(state, 1, 1, 0, kGpuHour), InA(state, 2, 1, 5, 0)};
  // Nothing learned yet: the order of las-2d (by age, within the queue).
  EXPECT_EQ(engine::OrderPending(state, jobs, 20 * kSecond, w), (std::vector<std::uint32_t>{0, 1}));
  // Most jobs end within an hour: one that has run an hour is likely long, a new one likely
  // short, so the new one goes first.
  for (Millis s : {kGpuHour / 2, kGpuHour / 2, kGpuHour / 2, 10 * kGpuHour})
    state.RecordFinishedService(s, 1000);
  EXPECT_EQ(engine::OrderPending(state, jobs, 20 * kSecond, w), (std::vector<std::uint32_t>{1, 0}));
  // The service queues still come first.
  w.las_thresholds = {kGpuHour / 2};
  jobs[0].attained = 0;
  jobs[1].attained = kGpuHour;
  EXPECT_EQ(engine::OrderPending(state, jobs, 20 * kSecond, w), (std::vector<std::uint32_t>{0, 1}));
}

}  // namespace
}  // namespace arbiter
