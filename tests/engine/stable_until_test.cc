// Plan::stable_until: until when a cycle on the same state and pending jobs decides the same, read
// off the inputs that change with time alone (ages reaching max_age, the fair-share refresh,
// running jobs reaching their estimated ends, victims' guards lifting).
#include <gtest/gtest.h>

#include "arbiter/engine.h"
#include "testing/builders.h"

namespace arbiter {
namespace {

using testing::Add;
using testing::MakeState;
using testing::Nodes;

constexpr Millis kMinute = 60 * kMillisPerSecond;
constexpr Millis kHour = 60 * kMinute;

// One node of 8 GPUs under two queues, a and b.
ClusterSpec OneNode() {
  ClusterSpec spec = testing::Cluster();
  Add(spec, Nodes("n", 1, "H800", 8));
  spec.queues = {testing::Queue("org"), testing::Queue("a", "org"), testing::Queue("b", "org")};
  return spec;
}

Job Whole(const ClusterState& state, JobId id, const std::string& queue, Millis submit) {
  return testing::QueuedJob(state, id, queue, 8000, submit);
}

// Options with no input that changes with time: the plan holds forever.
EngineOptions Timeless() {
  EngineOptions o;
  o.ordering.age = 0;
  o.ordering.fair_share = 0;
  o.backfill.reservations = 0;
  o.preemption.enabled = false;
  return o;
}

Plan Cycle(ClusterState& state, const std::vector<Job>& pending, Millis now,
           const EngineOptions& options) {
  return Engine(options).Schedule(state, pending, now);
}

TEST(StableUntil, APlanThatPlacesPromisesNothing) {
  ClusterState state = MakeState(OneNode());
  const Plan plan = Cycle(state, {Whole(state, 1, "a", 0)}, 10, Timeless());
  ASSERT_EQ(plan.binds.size(), 1u);
  EXPECT_EQ(plan.stable_until, 10);
}

TEST(StableUntil, ABlockedJobWithNothingTimedHoldsForever) {
  ClusterState state = MakeState(OneNode());
  testing::StartOn(state, Whole(state, 1, "a", 0), "n-0", 0, 0);
  const Plan plan =
      Cycle(state, {Whole(state, 2, "a", 0), Whole(state, 3, "b", 5)}, 10, Timeless());
  ASSERT_EQ(plan.unplaced.size(), 2u);
  EXPECT_EQ(plan.stable_until, kForever);
}

TEST(StableUntil, AgesReorderOnlyWhenOneReachesMaxAge) {
  ClusterState state = MakeState(OneNode());
  testing::StartOn(state, Whole(state, 1, "a", 0), "n-0", 0, 0);
  EngineOptions o = Timeless();
  o.ordering.age = 1000;
  o.ordering.max_age = kHour;
  const Plan plan =
      Cycle(state, {Whole(state, 2, "a", 10 * kMinute), Whole(state, 3, "b", 0)}, 20 * kMinute, o);
  EXPECT_EQ(plan.stable_until, kHour);  // job 3's age reaches max_age first
}

TEST(StableUntil, AnAgingJobOvertakesACappedOneWhenItReachesItsKey) {
  ClusterState state = MakeState(OneNode());
  testing::StartOn(state, Whole(state, 1, "a", 0), "n-0", 0, 0);
  EngineOptions o = Timeless();
  o.ordering.priority_class = 10000;
  o.ordering.age = 1000;
  o.ordering.max_age = kHour;
  // Job 2 (class P2: 100 for its class) waited past max_age: its key stays 100 + 1000. Job 3, of
  // the same class and 10 minutes old, reaches that key only as it caps, 50 minutes on.
  Job old = Whole(state, 2, "a", 0);
  old.priority_class = 2;
  Job aging = Whole(state, 3, "a", 2 * kHour - 10 * kMinute);
  aging.priority_class = 2;
  // (The times are taken a millisecond or two early: keys are floating point.)
  EXPECT_NEAR(static_cast<double>(Cycle(state, {old, aging}, 2 * kHour, o).stable_until),
              static_cast<double>(2 * kHour + 50 * kMinute), 2.0);
  // Job 4, of class P1 (1000) and just submitted, overtakes job 2 once its age makes up the gap
  // of 100: an age factor of 0.1, 6 minutes.
  Job behind = Whole(state, 4, "a", 2 * kHour);
  EXPECT_NEAR(static_cast<double>(Cycle(state, {old, behind}, 2 * kHour, o).stable_until),
              static_cast<double>(2 * kHour + 6 * kMinute), 2.0);
}

TEST(StableUntil, FairShareHoldsUntilItsNextRefresh) {
  ClusterSpec spec = OneNode();
  spec.fair_share_period = 5 * kMinute;
  ClusterState state = MakeState(spec);
  state.AccrueUsage(0);
  testing::StartOn(state, Whole(state, 1, "a", 0), "n-0", 0, 0);
  state.AccrueUsage(7 * kMinute);
  EngineOptions o = Timeless();
  o.ordering.fair_share = 2000;
  const std::vector<Job> two_queues = {Whole(state, 2, "a", 0), Whole(state, 3, "b", 0)};
  EXPECT_EQ(Cycle(state, two_queues, 7 * kMinute, o).stable_until, 10 * kMinute);
  // One queue pending: its jobs share the factor, the order cannot change.
  EXPECT_EQ(Cycle(state, {Whole(state, 2, "a", 0)}, 7 * kMinute, o).stable_until, kForever);
  // Without a period the factor changes with every accrual: no promise.
  ClusterState continuous = MakeState(OneNode());
  continuous.AccrueUsage(0);
  testing::StartOn(continuous, Whole(continuous, 1, "a", 0), "n-0", 0, 0);
  EXPECT_EQ(Cycle(continuous, two_queues, 7 * kMinute, o).stable_until, 7 * kMinute);
}

TEST(StableUntil, AReservationHoldsUntilARunningJobReachesItsEstimate) {
  ClusterState state = MakeState(OneNode());
  Job running = Whole(state, 1, "a", 0);
  running.runtime_estimate = kHour;
  testing::StartOn(state, running, "n-0", 0, 0);
  EngineOptions o = Timeless();
  o.backfill.reservations = 1;
  const Plan plan = Cycle(state, {Whole(state, 2, "a", 0)}, 10 * kMinute, o);
  ASSERT_EQ(plan.reservations.size(), 1u);
  EXPECT_EQ(plan.stable_until, kHour);
  // Past its estimate, its expected end slides with the time: no promise.
  EXPECT_EQ(Cycle(state, {Whole(state, 2, "a", 0)}, 2 * kHour, o).stable_until, 2 * kHour);
}

TEST(StableUntil, PreemptionHoldsUntilAVictimsGuardLifts) {
  ClusterSpec spec = OneNode();
  spec.priority_classes[2].min_runtime = 30 * kMinute;
  ClusterState state = MakeState(spec);
  Job victim = Whole(state, 1, "a", 0);
  victim.priority_class = 2;
  testing::StartOn(state, victim, "n-0", 0, 5 * kMinute);
  EngineOptions o = Timeless();
  o.preemption.enabled = true;
  Job preemptor = Whole(state, 2, "a", 0);
  preemptor.priority_class = 0;
  const Plan plan = Cycle(state, {preemptor}, 10 * kMinute, o);
  EXPECT_TRUE(plan.evictions.empty());
  EXPECT_EQ(plan.stable_until, 35 * kMinute);
  // Once the guard has lifted, the cycle evicts.
  const Plan later = Cycle(state, {preemptor}, 35 * kMinute, o);
  EXPECT_EQ(later.evictions.size(), 1u);
  EXPECT_EQ(later.stable_until, 35 * kMinute);
}

TEST(StableUntil, OnlyTheGuardsOfVictimsTheSearchMetCount) {
  // Two nodes. On n-0 a guarded job of class P2, which the preemptor (P1) may evict once its
  // minimum runtime is over; on n-1 a guarded job of class P1, which a P1 preemptor may never
  // evict (equal priorities never preempt each other), whose guard lifts earlier. Only the first
  // guard can change the decision.
  ClusterSpec spec = testing::Cluster();
  Add(spec, Nodes("n", 2, "H800", 8));
  spec.queues = {testing::Queue("org"), testing::Queue("a", "org")};
  spec.priority_classes[1].min_runtime = 20 * kMinute;
  spec.priority_classes[2].min_runtime = 30 * kMinute;
  ClusterState state = MakeState(spec);
  Job victim = Whole(state, 1, "a", 0);
  victim.priority_class = 2;
  testing::StartOn(state, victim, "n-0", 0, 5 * kMinute);
  Job peer = Whole(state, 2, "a", 0);
  peer.priority_class = 1;
  testing::StartOn(state, peer, "n-1", 0, 0);
  EngineOptions o = Timeless();
  o.preemption.enabled = true;
  Job preemptor = Whole(state, 3, "a", 0);
  preemptor.priority_class = 1;
  const Plan plan = Cycle(state, {preemptor}, 10 * kMinute, o);
  EXPECT_TRUE(plan.evictions.empty());
  EXPECT_EQ(plan.stable_until, 35 * kMinute);  // not the peer's 20 minutes
  // At 20 minutes the cycle still decides the same; at 35 it evicts the P2 job.
  EXPECT_TRUE(Cycle(state, {preemptor}, 20 * kMinute, o).evictions.empty());
  const Plan later = Cycle(state, {preemptor}, 35 * kMinute, o);
  ASSERT_EQ(later.evictions.size(), 1u);
  EXPECT_EQ(later.evictions[0].job, 1u);
}

}  // namespace
}  // namespace arbiter
