// The shortcuts placement takes must not change what it computes: a node's remembered measure is
// the measure of the node as it is now, and the arrays the state keeps for quick checks follow
// every change of the nodes.
#include <gtest/gtest.h>

#include <vector>

#include "engine/stages.h"
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
  state.TakeTask(half);
  ASSERT_NE(fresh(state, 1), model.Expected(Frees(other, 1), 64000, type));
  EXPECT_EQ(now(state, 1), fresh(state, 1));  // not the value remembered before the change
  EXPECT_EQ(now(other, 1), fresh(other, 1));  // not the value of the same node id elsewhere
  EXPECT_EQ(now(state, 1), fresh(state, 1));
  state.GiveTask(half);
  EXPECT_EQ(now(state, 1), fresh(state, 1));
}

TEST(ClusterState, TheQuickCheckArraysFollowEveryChange) {
  ClusterSpec spec = Cluster();
  Add(spec, Nodes("h", 2, "H800", 8));
  ClusterState state = MakeState(spec);
  const NodeId n = 1;
  const std::uint64_t stamp = state.NodeStamp(n);
  const TaskAllocation t = Task(state, n, 3, 250, 60000);
  state.TakeTask(t);
  EXPECT_EQ(state.DeviceFreeMilli(state.node(n).first_device + 3), 750);
  EXPECT_TRUE(state.NodeHasRoom(n, MilliCpu(4000), MemMiB(0)));
  EXPECT_FALSE(state.NodeHasRoom(n, MilliCpu(4001), MemMiB(0)));
  EXPECT_NE(state.NodeStamp(n), stamp);
  EXPECT_TRUE(state.NodeHasRoom(0, MilliCpu(64000), MemMiB(512 * 1024)));
  state.GiveTask(t);
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

}  // namespace
}  // namespace arbiter
