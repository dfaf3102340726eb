// Explain counts a failing shape's nodes from the free-capacity indexes when it can (every node
// of one GPU type, no node selector or affinity); otherwise it checks every node. Both must say
// the same: a node selector that every node satisfies changes nothing but the path taken.
#include <gtest/gtest.h>

#include "testing/builders.h"

namespace arbiter {
namespace {

using testing::Add;
using testing::Cluster;
using testing::GpuJob;
using testing::MakeState;
using testing::Nodes;

std::string Reason(ClusterState& state, const Job& job) {
  Engine engine{EngineOptions{}};
  const Plan plan = engine.Schedule(state, std::span<const Job>(&job, 1), 0);
  const Unplaced* u = testing::FindUnplaced(plan, job.id);
  return u ? u->reason.Describe() : "placed";
}

TEST(Explain, CountingFromTheIndexesSaysWhatCheckingEveryNodeSays) {
  ClusterSpec spec = Cluster();
  Add(spec, Nodes("h", 6, "H800", 8));
  Add(spec, Nodes("a", 3, "A100", 4));
  for (NodeSpec& n : spec.nodes) n.labels["pool"] = "gpu";
  spec.nodes[4].cordoned = true;
  spec.nodes[5].taints.push_back({"dedicated", "infer", TaintEffect::kNoSchedule});
  ClusterState state = MakeState(spec);
  // Free GPUs: h-0 none, h-1 2, h-2 5, h-3 8, h-4 (cordoned) 8, h-5 (tainted) 8; a-0 1, a-1 4.
  JobId id = 100;
  auto fill = [&](const std::string& node, std::int32_t gpus) {
    const Job job = GpuJob(id++, 1, gpus * 1000);
    const NodeId n = *state.FindNode(node);
    Allocation a;
    a.gpu_type = state.node(n).devices[0].type;
    TaskAllocation t;
    t.node = n;
    t.cpu = job.groups[0].request.cpu;
    t.memory = job.groups[0].request.memory;
    for (std::uint32_t d = 0; d < static_cast<std::uint32_t>(gpus); ++d) {
      t.devices.push_back({d, kWholeGpu, state.node(n).devices[d].memory});
    }
    a.tasks.push_back(t);
    ASSERT_TRUE(state.Bind(job, a, 0).ok());
  };
  fill("h-0", 8);
  fill("h-1", 6);
  fill("h-2", 3);
  fill("a-0", 3);
  fill("a-2", 4);

  struct Shape {
    std::int32_t tasks;
    std::int64_t gpu_milli;
    std::int64_t cpu_milli;
  };
  // Shapes that fail on every node, for different reasons: too many GPUs per task, too much CPU,
  // a gang wider than the free nodes.
  const Shape shapes[] = {{1, 9000, 1000}, {2, 8000, 1000}, {4, 8000, 1000}, {1, 4000, 100000},
                          {3, 5000, 1000}, {8, 4000, 1000}, {1, 8000, 1000}};
  int failing = 0;
  for (const Shape& s : shapes) {
    Job plain = GpuJob(1, s.tasks, s.gpu_milli);
    plain.groups[0].request.cpu = MilliCpu(s.cpu_milli);
    Job selected = plain;
    selected.node_selector = {{"pool", "gpu"}};  // every node: the full check
    const std::string reason = Reason(state, plain);
    EXPECT_EQ(reason, Reason(state, selected)) << s.tasks << " x " << s.gpu_milli;
    if (reason != "placed") ++failing;
  }
  EXPECT_GE(failing, 5);
}

}  // namespace
}  // namespace arbiter
