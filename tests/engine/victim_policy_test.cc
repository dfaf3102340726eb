// The preemption rules in one place: who may evict whom, which jobs are protected and until when,
// and what an eviction costs.
#include "core/engine/victim_policy.h"

#include <gtest/gtest.h>

#include <optional>

#include "testing/builders.h"

namespace arbiter {
namespace {

using engine::VictimPolicy;
using Kind = Eviction::Kind;
using testing::Add;
using testing::Cluster;
using testing::MakeState;
using testing::Nodes;

// Two trees: "org" with leaves "serve" (priority 10, evicts lower queues), "train" (reclaim, a
// guarantee) and "batch" (borrows, priority 0); and "other" alone. Classes: low (0), high (100),
// and "pinned" (50, not preemptible, with a minimum runtime).
ClusterState PolicyCluster() {
  ClusterSpec spec = Cluster();
  spec.priority_classes = {{"low", 0}, {"high", 100}, {"pinned", 50, false}};
  spec.priority_classes[0].min_runtime = 0;
  spec.priority_classes[1].min_runtime = 60 * kMillisPerSecond;
  spec.priority_classes[1].eviction_cooldown = 600 * kMillisPerSecond;
  spec.priority_classes[1].max_evictions = 2;
  spec.priority_classes[1].eviction_window = 3600 * kMillisPerSecond;
  QueueSpec org = testing::Queue("org");
  QueueSpec serve = testing::Queue("serve", "org");
  serve.priority = 10;
  serve.preempt_lower_priority = true;
  QueueSpec train = testing::Queue("train", "org");
  train.quota["gpu"].nominal = MilliGpu(8000);
  QueueSpec batch = testing::Queue("batch", "org");
  batch.quota["gpu"].nominal = MilliGpu(0);
  batch.reclaim = false;
  QueueSpec other = testing::Queue("other");
  other.preemptable = false;
  spec.queues = {org, serve, train, batch, other};
  Add(spec, Nodes("n", 2, "H800", 8));
  return MakeState(spec);
}

TEST(VictimPolicy, RelationFollowsQueueClassAndTree) {
  const ClusterState state = PolicyCluster();
  const VictimPolicy policy(state, OrderingWeights{});
  const QueueId serve = *state.FindQueue("serve"), train = *state.FindQueue("train"),
                batch = *state.FindQueue("batch"), other = *state.FindQueue("other");
  const PriorityClassId low = 0, high = 1;
  // Within a queue: only a strictly higher class value.
  EXPECT_EQ(policy.Relation(train, high, train, low, false), Kind::kWithinQueue);
  EXPECT_EQ(policy.Relation(train, low, train, low, false), std::nullopt);
  EXPECT_EQ(policy.Relation(train, low, train, high, false), std::nullopt);
  // By queue priority, whatever the classes.
  EXPECT_EQ(policy.Relation(serve, low, batch, high, false), Kind::kQueuePriority);
  EXPECT_EQ(policy.Relation(batch, high, serve, low, false), std::nullopt);
  // By reclaim, only when the preemptor's queue may reclaim now.
  EXPECT_EQ(policy.Relation(train, low, batch, high, true), Kind::kReclaim);
  EXPECT_EQ(policy.Relation(train, low, batch, high, false), std::nullopt);
  // Never across trees.
  EXPECT_EQ(policy.Relation(serve, high, other, low, true), std::nullopt);
  // Which evictions take only work above the victim's guarantee.
  EXPECT_TRUE(policy.OnlyAboveGuarantee(Kind::kReclaim, batch, 0));
  EXPECT_TRUE(policy.OnlyAboveGuarantee(Kind::kQueuePriority, batch, 0));  // quota limits it
  EXPECT_FALSE(policy.OnlyAboveGuarantee(Kind::kWithinQueue, batch, 0));
  EXPECT_TRUE(policy.MayEverReclaim(train));
  EXPECT_FALSE(policy.MayEverReclaim(batch));  // reclaim off
  EXPECT_TRUE(policy.MayEverBorrow(batch));
}

TEST(VictimPolicy, GuardsSayWhichProtectionRefusesAndWhenItLifts) {
  ClusterState state = PolicyCluster();
  const VictimPolicy policy(state, OrderingWeights{});
  const QueueId train = *state.FindQueue("train"), other = *state.FindQueue("other");
  EXPECT_EQ(policy.Protection(train, 2), engine::Guard::kClassNotPreemptible);
  EXPECT_EQ(policy.Protection(other, 0), engine::Guard::kQueueNotPreemptible);
  EXPECT_EQ(policy.Protection(train, 0), std::nullopt);
  EXPECT_TRUE(policy.Unguarded(train, 0));
  EXPECT_FALSE(policy.Unguarded(train, 1));  // a minimum runtime

  Job job = testing::GpuJob(1, 1, 1000);
  job.queue = train;
  job.priority_class = 1;
  const Millis s = kMillisPerSecond;
  state.RestoreEvictions(1, {100 * s, 1000 * s});
  testing::StartOn(state, job, "n-0", 0, 1000 * s);
  const RunningJob& r = *state.FindRunning(1);
  Millis until = 0;
  EXPECT_EQ(policy.GuardOf(r, 1030 * s, &until), engine::Guard::kMinRuntime);
  EXPECT_EQ(until, 1060 * s);
  EXPECT_EQ(policy.GuardOf(r, 1100 * s, &until), engine::Guard::kEvictionCooldown);
  EXPECT_EQ(until, 1600 * s);
  EXPECT_EQ(policy.GuardOf(r, 1700 * s, &until), engine::Guard::kEvictionBudget);
  EXPECT_EQ(until, 3700 * s);  // the first eviction in the window leaves it then
  EXPECT_EQ(policy.GuardOf(r, 3800 * s, &until), std::nullopt);
  EXPECT_STREQ(engine::GuardName(engine::Guard::kMinRuntime), "minimum runtime");
  EXPECT_STREQ(engine::GuardName(engine::Guard::kStartedAhead),
               "the order, which started them ahead of it");
  EXPECT_EQ(until, -1);
}

TEST(VictimPolicy, CostIsLostWorkWeightedByClass) {
  ClusterState state = PolicyCluster();
  const VictimPolicy policy(state, OrderingWeights{});
  const Millis s = kMillisPerSecond;
  // 2 GPUs for 100 s since the last checkpoint, plus 20 s of restart: 240 GPU-seconds.
  EXPECT_EQ(VictimPolicy::LostWork(2000, 0, 20 * s, 100 * s), 240 * s);
  EXPECT_EQ(VictimPolicy::LostWork(2000, 200 * s, 0, 100 * s), 0);  // (no negative work)
  EXPECT_DOUBLE_EQ(policy.Cost(1000, 0), 1000.0);                   // class value 0 of at most 100
  EXPECT_DOUBLE_EQ(policy.Cost(1000, 1), 2000.0);                   // class value 100 of 100
  Job job = testing::GpuJob(1, 1, 2000);
  job.queue = *state.FindQueue("train");
  job.restart_overhead = 20 * s;
  testing::StartOn(state, job, "n-0", 0, 0);
  ASSERT_TRUE(state.RecordCheckpoint(1, 50 * s).ok());
  const engine::Victim v = policy.CostOf(*state.FindRunning(1), 100 * s);
  EXPECT_EQ(v.lost, 2 * (50 + 20) * s);                         // since the checkpoint
  EXPECT_DOUBLE_EQ(v.cost, static_cast<double>(v.lost) * 2.0);  // class 1: value 100
}

}  // namespace
}  // namespace arbiter
