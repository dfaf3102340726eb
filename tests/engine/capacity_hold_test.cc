// Plan::capacity: the promise beyond the time. A plan that placed nothing holds after running
// jobs end and jobs arrive as long as no waiting job's need (GPUs free in the cluster, and for its
// largest task on one node) is met, when no waiting job may evict; a job behind the blocked head
// of a strict-FIFO queue needs nothing of its own. Engine::ArrivalChangesNothing decides arrivals;
// Engine::StaysBehind, which jobs a driver may leave out of the pending list behind another.
#include <gtest/gtest.h>

#include "arbiter/engine.h"
#include "core/state/cluster_state.h"
#include "testing/builders.h"

namespace arbiter {
namespace {

using testing::Add;
using testing::GpuJob;
using testing::MakeState;
using testing::Nodes;

// Two nodes of 8 GPUs, queues a (strict FIFO) and b.
ClusterSpec TwoNodes() {
  ClusterSpec spec = testing::Cluster();
  Add(spec, Nodes("n", 2, "H800", 8));
  QueueSpec a = testing::Queue("a", "org");
  a.strict_fifo = true;
  spec.queues = {testing::Queue("org"), a, testing::Queue("b", "org")};
  return spec;
}

Job InQueue(const ClusterState& state, JobId id, const std::string& queue, std::int64_t gpus,
            Millis submit, PriorityClassId cls = 1) {
  Job j = testing::QueuedJob(state, id, queue, gpus * kMilliPerGpu, submit);
  j.priority_class = cls;
  return j;
}

// 5 GPUs taken on each node: 6 free, at most 3 on one node.
ClusterState Fragmented(const ClusterSpec& spec = TwoNodes()) {
  ClusterState state = MakeState(spec);
  testing::StartOn(state, InQueue(state, 1, "b", 5, 0), "n-0", 0, 0);
  testing::StartOn(state, InQueue(state, 2, "b", 5, 0), "n-1", 0, 0);
  return state;
}

EngineOptions NoPreemption() {
  EngineOptions o;
  o.preemption.enabled = false;
  return o;
}

TEST(CapacityHold, TheStateCountsFreeGpusInTheClusterAndOnTheFreestNode) {
  ClusterState state = Fragmented();
  EXPECT_EQ(state.FreeGpuMilli(), 6000);
  EXPECT_EQ(state.MaxNodeFreeGpus(), 3);
  Job half = GpuJob(3, 1, 500);
  half.queue = *state.FindQueue("b");
  Allocation a;
  a.gpu_type = 0;
  TaskAllocation t;
  t.node = *state.FindNode("n-1");
  t.cpu = half.groups[0].request.cpu;
  t.memory = half.groups[0].request.memory;
  t.devices.push_back({5, MilliGpu(500), GpuMemMiB(0)});
  a.tasks.push_back(t);
  const Status bound = state.Bind(half, a, 0);
  ASSERT_TRUE(bound.ok()) << bound.message();
  EXPECT_EQ(state.FreeGpuMilli(), 5500);
  EXPECT_EQ(state.MaxNodeFreeGpus(), 3);  // n-0 still has 3; n-1 has 2.5
  ASSERT_TRUE(state.Unbind(1, 10).ok());
  EXPECT_EQ(state.MaxNodeFreeGpus(), 8);
  EXPECT_TRUE(state.CheckInvariants().ok());
}

TEST(CapacityHold, NeedsKeepOnlyTheLeastAndHoldWhileNoneIsMet) {
  CapacityHold hold;
  hold.given = true;
  hold.Add({2000, 2});
  hold.Add({1000, 4});
  hold.Add({3000, 2});  // met whenever {2000, 2} is
  ASSERT_EQ(hold.needs.size(), 2u);
  EXPECT_TRUE(hold.Holds(1500, 3));
  EXPECT_FALSE(hold.Holds(2000, 2));
  EXPECT_FALSE(hold.Holds(1000, 4));
  hold.Add({1000, 1});
  ASSERT_EQ(hold.needs.size(), 1u);
  EXPECT_FALSE(hold.Holds(1000, 1));
  hold.given = false;
  EXPECT_FALSE(hold.Holds(0, 0));
}

TEST(CapacityHold, ABlockedStrictFifoHeadNeedsItsTaskOnOneNodeAndTheJobsBehindItNothing) {
  ClusterState state = Fragmented();
  const std::vector<Job> pending = {InQueue(state, 10, "a", 8, 100),
                                    InQueue(state, 11, "a", 1, 200)};
  const Plan plan = Engine(NoPreemption()).Schedule(state, pending, 1000);
  ASSERT_TRUE(plan.binds.empty());
  ASSERT_TRUE(plan.capacity.given);
  EXPECT_TRUE(plan.capacity.arrivals);
  ASSERT_EQ(plan.capacity.needs.size(), 1u);
  EXPECT_EQ(plan.capacity.needs[0].milli, 8000);
  EXPECT_EQ(plan.capacity.needs[0].node_gpus, 8);
  ASSERT_EQ(plan.capacity.blocked_heads.size(), 1u);
  EXPECT_EQ(plan.capacity.blocked_heads[0].id, 10u);
  // The job behind the head was left out: the ages may reorder them, so the time still counts.
  EXPECT_FALSE(plan.capacity.timeless);
  // 6 GPUs free, 3 on a node: the head cannot start, nor the job behind it.
  EXPECT_TRUE(plan.capacity.Holds(state.FreeGpuMilli(), state.MaxNodeFreeGpus()));
  EXPECT_FALSE(plan.capacity.Holds(8000, 8));
}

TEST(CapacityHold, AJobThatFitsIsPlacedAndAPlanThatPlacesPromisesNothing) {
  ClusterState state = Fragmented();
  const std::vector<Job> pending = {InQueue(state, 11, "b", 1, 0)};
  const Plan plan = Engine(NoPreemption()).Schedule(state, pending, 10);
  ASSERT_EQ(plan.binds.size(), 1u);
  EXPECT_FALSE(plan.capacity.given);
}

TEST(CapacityHold, AWaitingJobThatMayEvictGivesNoPromise) {
  ClusterState state = Fragmented();
  // Class P0 may evict P1 and P2 within its queue (the running jobs are P1, but in queue b).
  EngineOptions o;
  o.preemption.enabled = true;
  const std::vector<Job> pending = {InQueue(state, 10, "a", 8, 0, 0)};
  const Plan plan = Engine(o).Schedule(state, pending, 10);
  ASSERT_TRUE(plan.binds.empty());
  EXPECT_TRUE(plan.evictions.empty());
  EXPECT_FALSE(plan.capacity.given);
}

TEST(CapacityHold, ArrivalsShortOfCapacityOrBehindTheHeadChangeNothing) {
  ClusterState state = Fragmented();
  const Engine engine(NoPreemption());
  const std::vector<Job> pending = {InQueue(state, 10, "a", 8, 100)};
  CapacityHold hold = engine.Schedule(state, pending, 1000).capacity;
  ASSERT_TRUE(hold.given);
  EXPECT_TRUE(hold.timeless);  // every waiting job's need is counted
  // Behind the head, of its class: it starts after it, whatever the ages.
  EXPECT_TRUE(engine.ArrivalChangesNothing(hold, state, InQueue(state, 12, "a", 1, 2000), 2000));
  EXPECT_EQ(hold.needs.size(), 1u);
  // Of a higher class: the order may put it first.
  EXPECT_FALSE(
      engine.ArrivalChangesNothing(hold, state, InQueue(state, 13, "a", 1, 2000, 0), 2000));
  // In queue b, 4 GPUs on one node: not free anywhere; its need joins the hold's.
  EXPECT_TRUE(engine.ArrivalChangesNothing(hold, state, InQueue(state, 14, "b", 4, 2000), 2000));
  ASSERT_EQ(hold.needs.size(), 1u);
  EXPECT_EQ(hold.needs[0].node_gpus, 4);
  // In queue b, 2 GPUs: free on a node.
  EXPECT_FALSE(engine.ArrivalChangesNothing(hold, state, InQueue(state, 15, "b", 2, 2000), 2000));
  // No promise, no arrival is free of change.
  CapacityHold none;
  EXPECT_FALSE(engine.ArrivalChangesNothing(none, state, InQueue(state, 16, "b", 8, 2000), 2000));
}

TEST(CapacityHold, AnArrivalThatAgesPastTheHeadIsAChange) {
  ClusterState state = Fragmented();
  EngineOptions o = NoPreemption();
  o.ordering.age = 1000;
  o.ordering.max_age = 60 * kMillisPerSecond;
  o.ordering.fair_share = 0;
  const Engine engine(o);
  // The head (class P2) has aged fully; a P1 job of a base above it once aged may pass it.
  const std::vector<Job> pending = {InQueue(state, 10, "a", 8, 0, 2)};
  CapacityHold hold = engine.Schedule(state, pending, 120 * kMillisPerSecond).capacity;
  ASSERT_TRUE(hold.given);
  const Millis now = 120 * kMillisPerSecond;
  EXPECT_FALSE(engine.ArrivalChangesNothing(hold, state, InQueue(state, 12, "a", 1, now), now));
  // Of the head's class, submitted after it: never ahead.
  EXPECT_TRUE(engine.ArrivalChangesNothing(hold, state, InQueue(state, 13, "a", 1, now, 2), now));
}

TEST(CapacityHold, UnderAHeterogeneityPolicyNoArrivalIsBehindAHead) {
  // The share-out of the GPU models reads every waiting job, those behind a head too.
  ClusterSpec spec = TwoNodes();
  spec.throughput.rows = {{"fast", {{"H800", 2}}}};
  ClusterState state = Fragmented(spec);
  EngineOptions o = NoPreemption();
  o.ordering.heterogeneity = HeterogeneityPolicy::kMaxThroughput;
  const Engine engine(o);
  const std::vector<Job> pending = {InQueue(state, 10, "a", 8, 100)};
  CapacityHold hold = engine.Schedule(state, pending, 1000).capacity;
  ASSERT_TRUE(hold.given);
  EXPECT_TRUE(hold.blocked_heads.empty());
  EXPECT_FALSE(engine.ArrivalChangesNothing(hold, state, InQueue(state, 12, "a", 1, 2000), 2000));
}

// EngineOptions::explain_every_job false: the cycle stops once no reservation is left to give
// and the free GPUs meet none of the rest's needs; the decisions are the whole list's.
TEST(StopEarly, TheRestOfTheOrderIsLeftUnexplainedAndTheDecisionsAreTheSame) {
  ClusterState state = Fragmented();  // 6 GPUs free, at most 3 on one node
  EngineOptions every = NoPreemption();
  EngineOptions stop = every;
  stop.explain_every_job = false;
  // 2 GPUs fit; the 8-GPU job then gets the reservation; the 4-GPU jobs need 4 on one node.
  const std::vector<Job> pending = {
      InQueue(state, 10, "b", 2, 100), InQueue(state, 11, "b", 8, 200),
      InQueue(state, 12, "b", 4, 300), InQueue(state, 13, "b", 4, 400)};
  const Plan whole = Engine(every).Schedule(state, pending, 1000);
  const Plan part = Engine(stop).Schedule(state, pending, 1000);
  ASSERT_EQ(whole.binds.size(), 1u);
  ASSERT_EQ(part.binds.size(), 1u);
  EXPECT_EQ(part.binds[0].job, 10u);
  EXPECT_EQ(part.binds[0].allocation.tasks[0].node, whole.binds[0].allocation.tasks[0].node);
  ASSERT_EQ(whole.reservations.size(), 1u);
  ASSERT_EQ(part.reservations.size(), 1u);
  EXPECT_EQ(part.reservations[0].job, 11u);
  EXPECT_EQ(part.reservations[0].start, whole.reservations[0].start);
  EXPECT_EQ(whole.unexplained, 0u);
  ASSERT_EQ(whole.unplaced.size(), 3u);
  ASSERT_EQ(part.unplaced.size(), 1u);
  EXPECT_EQ(part.unplaced[0].job, 11u);
  EXPECT_EQ(part.unplaced[0].reason.Describe(), whole.unplaced[0].reason.Describe());
  EXPECT_EQ(part.unexplained, 2u);
  // A job that fits further on: every job is taken.
  std::vector<Job> with_small = pending;
  with_small.push_back(InQueue(state, 14, "b", 1, 500));
  const Plan more = Engine(stop).Schedule(state, with_small, 1000);
  EXPECT_EQ(more.unexplained, 0u);
  EXPECT_EQ(more.binds.size(), 2u);
  // A waiting job that may evict: every job is taken (each gets its search).
  EngineOptions evicts = stop;
  evicts.preemption.enabled = true;
  std::vector<Job> with_evictor = pending;
  with_evictor.push_back(InQueue(state, 15, "a", 8, 500, 0));
  EXPECT_EQ(Engine(evicts).Schedule(state, with_evictor, 1000).unexplained, 0u);
}

TEST(StaysBehind, AJobOfItsClassSubmittedLaterWaitsBehindAJobOfItsStrictFifoQueue) {
  ClusterState state = Fragmented();
  const Engine engine(NoPreemption());
  const Job head = InQueue(state, 10, "a", 8, 100);
  EXPECT_TRUE(engine.StaysBehind(state, head, InQueue(state, 11, "a", 1, 200), 1000));
  // Transitive along a chain: behind a job that is behind the head.
  const Job second = InQueue(state, 11, "a", 1, 200);
  EXPECT_TRUE(engine.StaysBehind(state, second, InQueue(state, 12, "a", 2, 300), 1000));
  // Not: of a higher class (the order puts it first), of another queue, of a queue that is not
  // strict FIFO, or invalid (its reason is its own).
  EXPECT_FALSE(engine.StaysBehind(state, head, InQueue(state, 13, "a", 1, 200, 0), 1000));
  EXPECT_FALSE(engine.StaysBehind(state, head, InQueue(state, 14, "b", 1, 200), 1000));
  const Job in_b = InQueue(state, 15, "b", 8, 100);
  EXPECT_FALSE(engine.StaysBehind(state, in_b, InQueue(state, 16, "b", 1, 200), 1000));
  Job invalid = InQueue(state, 17, "a", 1, 200);
  invalid.groups.clear();
  EXPECT_FALSE(engine.StaysBehind(state, head, invalid, 1000));
}

TEST(StaysBehind, NotWhereAWaitingJobMayEvictOrTheOrderReadsEveryWaitingJob) {
  ClusterState state = Fragmented();
  const Job head = InQueue(state, 10, "a", 8, 100);
  const Job later = InQueue(state, 11, "a", 1, 200);
  // Class P0 may evict P1 and P2 within its queue: every unplaced job gets a victim search.
  EngineOptions evicts;
  evicts.preemption.enabled = true;
  EXPECT_FALSE(Engine(evicts).StaysBehind(state, head, later, 1000));
  EngineOptions las = NoPreemption();
  las.ordering.policy = OrderPolicy::kLas;
  EXPECT_FALSE(Engine(las).StaysBehind(state, head, later, 1000));
}

TEST(StaysBehind, APlanThatLeavesTheJobAheadUnplacedIsThePlanWithoutTheJobsBehindIt) {
  ClusterState state = Fragmented();
  const Engine engine(NoPreemption());
  // The head of a waits for a whole node; b's job fits; a's later jobs wait behind the head.
  const std::vector<Job> all = {InQueue(state, 10, "a", 8, 100), InQueue(state, 11, "b", 2, 150),
                                InQueue(state, 12, "a", 1, 200), InQueue(state, 13, "a", 1, 300)};
  ASSERT_TRUE(engine.StaysBehind(state, all[0], all[2], 1000));
  ASSERT_TRUE(engine.StaysBehind(state, all[2], all[3], 1000));
  const Plan whole = engine.Schedule(state, all, 1000);
  const std::vector<Job> window(all.begin(), all.begin() + 2);
  const Plan part = engine.Schedule(state, window, 1000);
  ASSERT_EQ(whole.binds.size(), 1u);
  ASSERT_EQ(part.binds.size(), 1u);
  EXPECT_EQ(whole.binds[0].job, part.binds[0].job);
  EXPECT_EQ(whole.binds[0].allocation.tasks[0].node, part.binds[0].allocation.tasks[0].node);
  ASSERT_EQ(whole.unplaced.size(), 3u);
  ASSERT_EQ(part.unplaced.size(), 1u);
  EXPECT_EQ(part.unplaced[0].job, 10u);
  for (const Unplaced& u : whole.unplaced) {
    if (u.job == 10) continue;
    EXPECT_EQ(u.reason.cause, Cause::kQueueOrder) << u.job;
  }
}

}  // namespace
}  // namespace arbiter
