// Ordering: the multifactor key and its tie-breaks.
#include <gtest/gtest.h>

#include <algorithm>

#include "arbiter/engine.h"
#include "core/engine/stages.h"
#include "testing/builders.h"

namespace arbiter {
namespace {

using testing::Add;
using testing::Cluster;
using testing::GpuJob;
using testing::MakeState;
using testing::Nodes;

ClusterSpec TwoQueues() {
  ClusterSpec spec = Cluster();
  Add(spec, Nodes("n", 2, "H800", 8));
  spec.queues = {testing::Queue("org"), testing::Queue("a", "org"), testing::Queue("b", "org")};
  return spec;
}

Job InQueue(const ClusterState& state, JobId id, const std::string& queue, Millis submit = 0) {
  Job j = GpuJob(id, 1, 1000);
  j.queue = *state.FindQueue(queue);
  j.submit_time = submit;
  return j;
}

// `n` jobs of both queues and three classes, submitted in a scrambled order within `spread` ms.
std::vector<Job> MixedJobs(const ClusterState& state, JobId n, Millis spread) {
  std::vector<Job> jobs;
  for (JobId id = 1; id <= n; ++id) {
    Job j = InQueue(state, id, id % 3 == 0 ? "b" : "a", static_cast<Millis>(id * 7919) % spread);
    j.priority_class = static_cast<PriorityClassId>(id % 3);
    jobs.push_back(j);
  }
  return jobs;
}

TEST(Order, TiesGoBySubmitTimeThenId) {
  ClusterState state = MakeState(TwoQueues());
  std::vector<Job> jobs = {InQueue(state, 3, "a", 5), InQueue(state, 1, "a", 5),
                           InQueue(state, 2, "a", 4)};
  OrderingWeights w;
  w.age = 0;  // isolate the tie-breaks
  EXPECT_EQ(engine::OrderPending(state, jobs, 10, w), (std::vector<std::uint32_t>{2, 1, 0}));
}

// A driver passes its jobs in the last plan's order with the arrivals after them (Plan::order);
// the engine merges the arrivals in. The order is the jobs', whatever the list's.
TEST(Order, AListInTheLastOrderWithArrivalsAfterItGivesTheSameOrderAsAnyOther) {
  ClusterState state = MakeState(TwoQueues());
  const std::vector<Job> jobs = MixedJobs(state, 40, 50);
  OrderingWeights w;
  const Millis now = 100;
  auto ids = [](const std::vector<Job>& list, const std::vector<std::uint32_t>& order) {
    std::vector<JobId> out;
    for (std::uint32_t i : order) out.push_back(list[i].id);
    return out;
  };
  // The first 30 in the order a cycle gave them, then 10 arrivals.
  const std::vector<Job> first(jobs.begin(), jobs.begin() + 30);
  std::vector<Job> kept;
  for (std::uint32_t i : engine::OrderPending(state, first, now, w)) kept.push_back(first[i]);
  kept.insert(kept.end(), jobs.begin() + 30, jobs.end());
  const std::vector<std::uint32_t> merged = engine::OrderPending(state, kept, now, w);
  EXPECT_EQ(ids(kept, merged), ids(jobs, engine::OrderPending(state, jobs, now, w)));
  // Reversed: nothing in order.
  std::vector<Job> reversed(jobs.rbegin(), jobs.rend());
  EXPECT_EQ(ids(reversed, engine::OrderPending(state, reversed, now, w)), ids(kept, merged));
}

// Engine::Schedule's order_hint: any hint, valid or not, gives the same order.
TEST(Order, AnOrderHintGivesTheSameOrderAsNone) {
  ClusterState state = MakeState(TwoQueues());
  const std::vector<Job> jobs = MixedJobs(state, 30, 40);
  OrderingWeights w;
  const std::vector<std::uint32_t> plain = engine::OrderPending(state, jobs, 100, w);
  // The order itself, a part of it (the rest merged in), reversed, and invalid ones (an index
  // twice, one out of range, longer than the list).
  const std::vector<std::uint32_t> part(plain.begin() + 5, plain.begin() + 20);
  const std::vector<std::uint32_t> reversed(plain.rbegin(), plain.rend());
  // In order within each queue, the queues one after the other (as after a fair-share refresh
  // that moved the queues past each other): the queues' runs are merged. And the same with the
  // queues' runs reversed within one queue (not in order within it: sorted).
  auto queues_in_turn = [&](const char* first, const char* second) {
    std::vector<std::uint32_t> out;
    for (QueueId q : {*state.FindQueue(first), *state.FindQueue(second)}) {
      for (std::uint32_t i : plain) {
        if (jobs[i].queue == q) out.push_back(i);
      }
    }
    return out;
  };
  std::vector<std::uint32_t> by_queue = queues_in_turn("a", "b");
  if (by_queue == plain) by_queue = queues_in_turn("b", "a");
  ASSERT_NE(by_queue, plain);
  std::vector<std::uint32_t> broken = by_queue;
  std::reverse(broken.begin(), broken.begin() + 3);
  const std::vector<std::vector<std::uint32_t>> hints = {
      plain, part, reversed, by_queue, broken, {3, 3}, {0, 99}, std::vector<std::uint32_t>(31, 0)};
  for (const std::vector<std::uint32_t>& hint : hints) {
    EXPECT_EQ(engine::OrderPending(state, jobs, 100, w, BackfillOptions{}.default_runtime, hint),
              plain);
  }
  EngineOptions o;
  EXPECT_EQ(Engine(o).Schedule(state, jobs, 100, part).order, plain);
}

TEST(Order, ThePlanSaysTheCyclesOrder) {
  ClusterState state = MakeState(TwoQueues());
  std::vector<Job> jobs = {InQueue(state, 3, "a", 5), InQueue(state, 1, "a", 5),
                           InQueue(state, 2, "a", 4)};
  EngineOptions o;
  o.ordering.age = 0;
  EXPECT_EQ(Engine(o).Schedule(state, jobs, 10).order, (std::vector<std::uint32_t>{2, 1, 0}));
  const std::vector<Job> one = {jobs[0]};
  EXPECT_EQ(Engine(o).Schedule(state, one, 10).order, (std::vector<std::uint32_t>{0}));
}

TEST(Order, FairShareFavoursTheQueueThatUsedLess) {
  ClusterState state = MakeState(TwoQueues());
  // Queue a ran 8 GPUs for an hour; b ran nothing.
  Job past = InQueue(state, 100, "a");
  past.groups[0].request.gpu = MilliGpu(8000);
  Allocation alloc;
  alloc.gpu_type = 0;
  TaskAllocation t;
  t.cpu = past.groups[0].request.cpu;
  t.memory = past.groups[0].request.memory;
  for (std::uint32_t d = 0; d < 8; ++d) t.devices.push_back({d, kWholeGpu, GpuMemMiB(81920)});
  alloc.tasks.push_back(t);
  state.AccrueUsage(0);
  ASSERT_TRUE(state.Bind(past, alloc, 0).ok());
  ASSERT_TRUE(state.Unbind(100, 3600 * kMillisPerSecond).ok());
  EXPECT_GT(state.recent_usage(*state.FindQueue("a")), 0.0);
  EXPECT_GT(state.recent_usage(*state.FindQueue("org")), 0.0);
  EXPECT_EQ(state.recent_usage(*state.FindQueue("b")), 0.0);

  // a's job was submitted first, but b has the better fair-share factor.
  std::vector<Job> jobs = {InQueue(state, 1, "a", 0), InQueue(state, 2, "b", 1)};
  EXPECT_EQ(engine::OrderPending(state, jobs, 3600 * kMillisPerSecond, {}),
            (std::vector<std::uint32_t>{1, 0}));
  const OrderingWeights w;
  EXPECT_NEAR(engine::OrderingKey(state, jobs[1], 0, w) - engine::OrderingKey(state, jobs[0], 0, w),
              w.fair_share * (1.0 - 0.25), 1e-6);  // a used all: 2^(-1 / 0.5) = 0.25; b: 1
}

TEST(Order, RecentUsageDecaysWithTheHalfLife) {
  ClusterSpec spec = TwoQueues();
  spec.fair_share_half_life = 3600 * kMillisPerSecond;
  ClusterState state = MakeState(spec);
  state.AccrueUsage(0);
  Job j = InQueue(state, 1, "a");
  Allocation alloc;
  alloc.gpu_type = 0;
  TaskAllocation t;
  t.cpu = j.groups[0].request.cpu;
  t.memory = j.groups[0].request.memory;
  t.devices.push_back({0, kWholeGpu, GpuMemMiB(81920)});
  alloc.tasks.push_back(t);
  ASSERT_TRUE(state.Bind(j, alloc, 0).ok());
  ASSERT_TRUE(state.Unbind(1, 1000).ok());  // 1000 milli-GPU for 1000 ms
  const double after_use = state.recent_usage(*state.FindQueue("a"));
  EXPECT_DOUBLE_EQ(after_use, 1000.0 * 1000.0);
  state.AccrueUsage(1000 + 3600 * kMillisPerSecond);
  EXPECT_NEAR(state.recent_usage(*state.FindQueue("a")), after_use / 2, 1e-6);
}

TEST(Order, WithAPeriodFairShareReadsTheUsageOfTheLastBoundary) {
  ClusterSpec spec = TwoQueues();
  spec.fair_share_period = 5 * 60 * kMillisPerSecond;
  ClusterState state = MakeState(spec);
  const QueueId a = *state.FindQueue("a");
  state.AccrueUsage(0);
  EXPECT_EQ(state.NextFairShareRefresh(0), 5 * 60 * kMillisPerSecond);
  EXPECT_EQ(state.NextFairShareRefresh(5 * 60 * kMillisPerSecond - 1), 5 * 60 * kMillisPerSecond);
  EXPECT_EQ(state.NextFairShareRefresh(5 * 60 * kMillisPerSecond), 10 * 60 * kMillisPerSecond);
  EXPECT_EQ(state.NextFairShareRefresh(-1), 0);
  Job j = InQueue(state, 1, "a");
  Allocation alloc;
  alloc.gpu_type = 0;
  TaskAllocation t;
  t.cpu = j.groups[0].request.cpu;
  t.memory = j.groups[0].request.memory;
  t.devices.push_back({0, kWholeGpu, GpuMemMiB(81920)});
  alloc.tasks.push_back(t);
  ASSERT_TRUE(state.Bind(j, alloc, 0).ok());
  // Before the first boundary the order sees no usage; the recent usage grows all the same.
  state.AccrueUsage(60 * kMillisPerSecond);
  EXPECT_GT(state.recent_usage(a), 0.0);
  EXPECT_EQ(state.fair_share_usage(a), 0.0);
  // Past it, the usage accrued up to the boundary, not up to now.
  state.AccrueUsage(7 * 60 * kMillisPerSecond);
  EXPECT_GT(state.fair_share_usage(a), 0.0);
  EXPECT_LT(state.fair_share_usage(a), state.recent_usage(a));
  // (1000 milli-GPU for 5 minutes, decayed by a day's half-life over the minutes since.)
  EXPECT_NEAR(state.fair_share_usage(a), 1000.0 * 5 * 60 * kMillisPerSecond, 3e5);
  // Without a period the order reads the usage as of the last accrual.
  ClusterState continuous = MakeState(TwoQueues());
  EXPECT_EQ(continuous.NextFairShareRefresh(0), -1);
}

TEST(Order, AFairSharePeriodMustNotBeNegative) {
  ClusterSpec spec = TwoQueues();
  spec.fair_share_period = -1;
  Result<ClusterState> state = ClusterState::Create(spec);
  ASSERT_FALSE(state.ok());
  EXPECT_EQ(state.status().field(), "fair_share_period");
}

TEST(Order, QueuePriorityIsAFactor) {
  ClusterSpec spec = TwoQueues();
  spec.queues[2].priority = 10;
  ClusterState state = MakeState(spec);
  std::vector<Job> jobs = {InQueue(state, 1, "a", 0), InQueue(state, 2, "b", 1)};
  EXPECT_EQ(engine::OrderPending(state, jobs, 1, {}), (std::vector<std::uint32_t>{1, 0}));
}

}  // namespace
}  // namespace arbiter
