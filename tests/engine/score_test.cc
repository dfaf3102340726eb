// The shortcuts placement takes must not change what it computes: a node's remembered measure and
// kept score are those of the node as it is now, and the arrays the state keeps for quick checks
// follow every change of the nodes.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <tuple>
#include <vector>

#include "core/engine/stages.h"
#include "testing/builders.h"

namespace arbiter {
namespace {

using testing::Add;
using testing::Cluster;
using testing::MakeState;
using testing::Nodes;

std::vector<std::int64_t> Frees(const ClusterState& state, NodeId n) {
  std::vector<std::int64_t> frees;
  for (const DeviceState& d : state.node(n).devices) frees.push_back(d.free.value());
  return frees;
}

TaskAllocation Task(const ClusterState& state, NodeId n, std::uint32_t device, std::int64_t milli,
                    std::int64_t cpu) {
  TaskAllocation t;
  t.node = n;
  t.cpu = MilliCpu(cpu);
  t.memory = MemMiB(1024);
  t.devices.push_back({device, MilliGpu(milli), state.node(n).devices[device].memory});
  return t;
}

TEST(FragModel, ARememberedMeasureIsTheMeasureOfTheNodeAsItIsNow) {
  ClusterSpec spec = Cluster();
  Add(spec, Nodes("h", 3, "H800", 8));
  ClusterState state = MakeState(spec);
  ClusterState other = MakeState(spec);  // the same node ids, another state
  const std::vector<TaskShape> shapes = {
      {500, 4000, 0, {}, 3}, {1000, 8000, 0, {}, 2}, {4000, 32000, 0, {}, 1}};
  const engine::FragModel model(shapes, /*fgd=*/false);
  const GpuTypeId type = state.node(1).devices[0].type;
  auto now = [&](const ClusterState& s, NodeId n) {
    return model.ExpectedNow(s, n, Frees(s, n), s.node(n).cpu_free.value(), type);
  };
  auto fresh = [&](const ClusterState& s, NodeId n) {
    return model.Expected(Frees(s, n), s.node(n).cpu_free.value(), type);
  };

  EXPECT_EQ(now(state, 1), fresh(state, 1));
  const TaskAllocation half = Task(state, 1, 2, 500, 20000);
  Transaction tx(state);
  tx.Take(half);
  ASSERT_NE(fresh(state, 1), model.Expected(Frees(other, 1), 64000, type));
  EXPECT_EQ(now(state, 1), fresh(state, 1));  // not the value remembered before the change
  EXPECT_EQ(now(other, 1), fresh(other, 1));  // not the value of the same node id elsewhere
  EXPECT_EQ(now(state, 1), fresh(state, 1));
  tx.Give(half);
  EXPECT_EQ(now(state, 1), fresh(state, 1));
}

// The measure's terms for one shape (docs/design/placement.md): where a task of the shape lands,
// the free shares too small for it and the free GPU its tasks, one after another, leave; where none
// lands (too few devices with room, or too little CPU), the node's whole free GPU four times.
// FGD counts the first term only, and the whole free GPU once where the task does not land.
TEST(FragModel, AShapeThatCannotLandCountsTheNodesFreeGpuFourTimes) {
  const std::vector<TaskShape> shapes = {{2000, 16000, 0, {}, 1}};  // 2 GPUs, 16 cores
  const engine::FragModel model(shapes, /*fgd=*/false);
  const engine::FragModel fgd(shapes, /*fgd=*/true);
  using Frees = std::vector<std::int64_t>;
  // Lands once: one of three free devices left over.
  EXPECT_DOUBLE_EQ(model.Expected(Frees{1000, 1000, 1000}, 64000, 0), 1000);
  EXPECT_DOUBLE_EQ(fgd.Expected(Frees{1000, 1000, 1000}, 64000, 0), 0);
  // Lands once, and a device's free half is too small for it: counted by both terms.
  EXPECT_DOUBLE_EQ(model.Expected(Frees{1000, 1000, 500}, 64000, 0), 500 + 500);
  EXPECT_DOUBLE_EQ(fgd.Expected(Frees{1000, 1000, 500}, 64000, 0), 500);
  // Lands twice, CPU for once: the second pair of devices is left.
  EXPECT_DOUBLE_EQ(model.Expected(Frees{1000, 1000, 1000, 1000}, 20000, 0), 2000);
  // Cannot land: one free device, or two without the CPU.
  EXPECT_DOUBLE_EQ(model.Expected(Frees{1000, 0, 0}, 64000, 0), 4 * 1000);
  EXPECT_DOUBLE_EQ(fgd.Expected(Frees{1000, 0, 0}, 64000, 0), 1000);
  EXPECT_DOUBLE_EQ(model.Expected(Frees{1000, 1000, 500}, 8000, 0), 4 * 2500);
  EXPECT_DOUBLE_EQ(fgd.Expected(Frees{1000, 1000, 500}, 8000, 0), 2500);
}

// Expected remembers its value by the capacity it reads (free CPU, fully free devices, the free
// shares of the others, in any order): the value remembered is the value computed afresh, for
// more capacities than the memory has slots.
TEST(FragModel, AMeasureRememberedByCapacityIsTheMeasureOfThatCapacity) {
  const std::vector<TaskShape> shapes = {{250, 2000, 0, {}, 3},
                                         {500, 4000, 0, {}, 3},
                                         {1000, 8000, 0, {}, 2},
                                         {2000, 16000, 0, GpuTypeSet::Of(1), 1},
                                         {4000, 32000, 0, {}, 1}};
  const engine::FragModel remembering(shapes, /*fgd=*/false);
  std::uint64_t x = 0;
  auto next = [&](std::uint64_t n) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    return (x >> 33) % n;
  };
  for (int round = 0; round < 2; ++round) {
    x = 12345;  // the same capacities again, after others took their slots
    for (int i = 0; i < 3000; ++i) {
      std::vector<std::int64_t> frees(8);
      for (std::int64_t& f : frees) {
        const std::uint64_t kind = next(4);
        f = kind == 0 ? 0 : kind == 1 ? 1000 : static_cast<std::int64_t>(next(1000));
      }
      const auto cpu = static_cast<std::int64_t>(next(64) * 1000);
      const auto type = static_cast<GpuTypeId>(next(2));
      const engine::FragModel fresh(shapes, /*fgd=*/false);
      const double expected = fresh.Expected(frees, cpu, type);
      EXPECT_EQ(remembering.Expected(frees, cpu, type), expected);
      std::reverse(frees.begin(), frees.end());  // the same capacity, its devices in another order
      EXPECT_EQ(remembering.Expected(frees, cpu, type), expected);
    }
  }
}

// A node's kept score is the score the node has now, for the request asked.
TEST(NodeScorer, AKeptScoreIsTheScoreOfTheNodeAsItIsNowForTheRequestAsked) {
  ClusterSpec spec = Cluster();
  Add(spec, Nodes("a", 2, "A100", 8, /*group_size=*/4));
  ClusterState state = MakeState(spec);
  const std::vector<TaskShape> shapes = {
      {500, 4000, 0, {}, 3}, {1000, 8000, 0, {}, 2}, {4000, 32000, 0, {}, 1}};
  const PlacementOptions options;
  const auto kept = std::make_shared<engine::FragModel>(shapes, /*fgd=*/false);
  const GpuTypeId type = state.node(0).devices[0].type;
  const Job share = testing::GpuJob(1, 1, 300);
  const Job two = testing::GpuJob(2, 1, 2000);   // one task of two GPUs
  const Job four = testing::GpuJob(3, 1, 4000);  // one task of four
  // Scores node n for the job's task with the kept model, and with a new model (nothing kept).
  auto score = [&](const Job& job, NodeId n, bool allow_span, const engine::FragModel& model) {
    const TaskRequest& req = job.groups[0].request;
    engine::NodeScorer scorer(state, job, req, type, options, &model);
    std::vector<DeviceShare> devices;
    double value = 0;
    const bool fits = scorer.Score(n, allow_span, devices, value);
    std::vector<std::uint32_t> ids;
    for (const DeviceShare& d : devices) ids.push_back(d.device);
    return std::make_tuple(fits, fits ? value : 0, ids);
  };
  auto both = [&](const Job& job, NodeId n, bool allow_span) {
    const engine::FragModel fresh(shapes, /*fgd=*/false);
    const auto expected = score(job, n, allow_span, fresh);
    EXPECT_EQ(score(job, n, allow_span, *kept), expected);  // kept, or measured and kept
    EXPECT_EQ(score(job, n, allow_span, *kept), expected);  // kept
  };
  both(share, 1, false);
  both(two, 1, false);
  // Three tasks break into both NVLink groups: four devices fit only across them.
  const TaskAllocation a = Task(state, 1, 0, 1000, 1000);
  const TaskAllocation b = Task(state, 1, 5, 500, 1000);
  const TaskAllocation c = Task(state, 1, 6, 1000, 1000);
  Transaction tx(state);
  for (const TaskAllocation* t : {&a, &b, &c}) {
    tx.Take(*t);
    both(share, 1, false);
    both(two, 1, false);
  }
  both(four, 1, false);
  both(four, 1, true);
  EXPECT_FALSE(std::get<0>(score(four, 1, false, *kept)));
  EXPECT_TRUE(std::get<0>(score(four, 1, true, *kept)));
  tx.Give(b);
  both(share, 1, false);
  both(share, 0, false);
}

// A discarded transaction gives the nodes' stamps back; a stamp given later is one no capacity of
// the node had before, so nothing remembered under another capacity is found.
TEST(Transaction, ADiscardGivesTheStampsBack) {
  ClusterSpec spec = Cluster();
  Add(spec, Nodes("h", 2, "H800", 8));
  ClusterState state = MakeState(spec);
  const TaskAllocation a = Task(state, 1, 0, 500, 1000);
  const TaskAllocation b = Task(state, 1, 1, 1000, 1000);
  const TaskAllocation c = Task(state, 0, 2, 250, 1000);
  Transaction outer(state);
  outer.Take(c);  // (a stamp before the nested transaction that is not the first)
  const std::vector<std::uint64_t> before = {state.NodeStamp(0), state.NodeStamp(1)};
  std::vector<std::uint64_t> seen;
  {
    Transaction tx(outer);
    tx.Take(a);
    seen.push_back(state.NodeStamp(1));
    tx.Take(b);
    seen.push_back(state.NodeStamp(1));
    tx.Give(a);  // not in the order taken
    seen.push_back(state.NodeStamp(1));
    tx.Give(b);
    tx.Give(c);
    seen.push_back(state.NodeStamp(0));
    tx.Take(c);
  }  // discarded
  EXPECT_EQ(state.NodeStamp(0), before[0]);
  EXPECT_EQ(state.NodeStamp(1), before[1]);
  // Changes that stay (committed): new stamps, none of them one given in the discarded one.
  {
    Transaction tx(outer);
    tx.Take(a);
    tx.Give(c);
    tx.Commit();
  }
  for (NodeId n : {NodeId{0}, NodeId{1}}) {
    EXPECT_NE(state.NodeStamp(n), before[n]);
    for (std::uint64_t s : seen) EXPECT_NE(state.NodeStamp(n), s);
  }
  EXPECT_TRUE(state.CheckInvariants().ok());
}

TEST(ClusterState, TheQuickCheckArraysFollowEveryChange) {
  ClusterSpec spec = Cluster();
  Add(spec, Nodes("h", 2, "H800", 8));
  ClusterState state = MakeState(spec);
  const NodeId n = 1;
  const std::uint64_t stamp = state.NodeStamp(n);
  const TaskAllocation t = Task(state, n, 3, 250, 60000);
  Transaction tx(state);
  tx.Take(t);
  EXPECT_EQ(state.DeviceFreeMilli(state.node(n).first_device + 3), 750);
  EXPECT_TRUE(state.NodeHasRoom(n, MilliCpu(4000), MemMiB(0)));
  EXPECT_FALSE(state.NodeHasRoom(n, MilliCpu(4001), MemMiB(0)));
  EXPECT_NE(state.NodeStamp(n), stamp);
  EXPECT_TRUE(state.NodeHasRoom(0, MilliCpu(64000), MemMiB(512 * 1024)));
  tx.Give(t);
  EXPECT_EQ(state.DeviceFreeMilli(state.node(n).first_device + 3), 1000);
  EXPECT_TRUE(state.NodeHasRoom(n, MilliCpu(64000), MemMiB(512 * 1024)));
  EXPECT_TRUE(state.CheckInvariants().ok());
}

TEST(Placement, AGangLargerThanEveryNvlinkGroupStillTakesOneNode) {
  ClusterSpec spec = Cluster();
  Add(spec, Nodes("a", 2, "A100", 8, /*group_size=*/4));
  ClusterState state = MakeState(spec);
  const GpuTypeId type = state.node(0).devices[0].type;
  EXPECT_EQ(state.TypeLargestNvlinkGroup(type), 4u);
  const Job gang = testing::GpuJob(1, 8, 1000);
  Engine engine{EngineOptions{}};
  const Plan plan = engine.Schedule(state, std::span<const Job>(&gang, 1), 0);
  ASSERT_EQ(plan.binds.size(), 1u);
  const Allocation& a = plan.binds[0].allocation;
  for (const TaskAllocation& t : a.tasks) EXPECT_EQ(t.node, a.tasks.front().node);
}

TEST(Placement, ATaskAskingMoreGpuMemoryThanATypeHasGoesToATypeThatHasIt) {
  ClusterSpec spec = Cluster();
  std::vector<NodeSpec> small = Nodes("l", 3, "L40S", 8);
  for (NodeSpec& n : small) {
    for (DeviceSpec& d : n.devices) d.memory = GpuMemMiB(48 * 1024);
  }
  Add(spec, small);
  Add(spec, Nodes("h", 1, "H800", 8));  // 80 GiB devices
  ClusterState state = MakeState(spec);
  Job job = testing::GpuJob(1, 1, 2000);
  job.groups[0].request.gpu_memory = GpuMemMiB(64 * 1024);
  Engine engine{EngineOptions{}};
  const Plan plan = engine.Schedule(state, std::span<const Job>(&job, 1), 0);
  ASSERT_EQ(plan.binds.size(), 1u);
  EXPECT_EQ(state.gpu_type_name(plan.binds[0].allocation.gpu_type), "H800");
  job.gpu_types = GpuTypeSet::Of(state.node(0).devices[0].type);  // L40S only: never fits
  const Plan refused = engine.Schedule(state, std::span<const Job>(&job, 1), 0);
  EXPECT_TRUE(refused.binds.empty());
  ASSERT_EQ(refused.unplaced.size(), 1u);
  EXPECT_EQ(refused.unplaced[0].reason.cause, Cause::kGpuMemory)
      << refused.unplaced[0].reason.Describe();
}

}  // namespace
}  // namespace arbiter
