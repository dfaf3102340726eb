// The engine library as a user of it sees it: this program is built against include/arbiter/
// alone (its own target, arbiter_library_tests, which links only the engine library and has no
// src/ on its include path), so it shows that the public headers are enough to build a cluster,
// plan, apply the plan, read the result and report what happens to running jobs.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "arbiter/engine.h"
#include "arbiter/model.h"
#include "arbiter/plan.h"
#include "arbiter/state.h"
#include "arbiter/status.h"

namespace arbiter {
namespace {

// Two nodes of four A100s (two NVLink pairs each), two queues of one tree with a guarantee of 4
// GPUs each.
ClusterSpec TwoNodes() {
  ClusterSpec spec;
  for (const char* name : {"a-0", "a-1"}) {
    NodeSpec node;
    node.name = name;
    node.cpu = MilliCpu{64000};
    node.memory = MemMiB{512 * 1024};
    for (std::uint32_t d = 0; d < 4; ++d) {
      node.devices.push_back(
          DeviceSpec{.type = "A100", .memory = GpuMemMiB{80 * 1024}, .nvlink_group = d / 2});
    }
    spec.nodes.push_back(node);
  }
  QueueSpec root;
  root.name = "all";
  spec.queues.push_back(root);
  for (const char* name : {"research", "prod"}) {
    QueueSpec queue;
    queue.name = name;
    queue.parent = "all";  // one cohort: each may borrow what the other leaves unused
    queue.quota[kAllGpusResource].nominal = MilliGpu{4 * kMilliPerGpu};
    spec.queues.push_back(queue);
  }
  PriorityClassSpec normal;
  normal.name = "normal";
  normal.value = 100;
  spec.priority_classes.push_back(normal);
  return spec;
}

Job GpuJob(const Cluster& cluster, JobId id, const std::string& queue, std::int32_t tasks,
           std::int64_t gpus_each) {
  Job job;
  job.id = id;
  job.name = "job-" + std::to_string(id);
  job.queue = *cluster.FindQueue(queue);
  job.priority_class = *cluster.FindPriorityClass("normal");
  job.submit_time = static_cast<Millis>(id);  // the older first
  job.groups.push_back(TaskGroup{.name = "worker",
                                 .count = tasks,
                                 .request = TaskRequest{.gpu = MilliGpu{gpus_each * kMilliPerGpu},
                                                        .gpu_memory = GpuMemMiB{0},
                                                        .cpu = MilliCpu{1000},
                                                        .memory = MemMiB{1024}}});
  return job;
}

TEST(Library, AClusterIsBuiltPlannedAndReadThroughThePublicHeaders) {
  Result<Cluster> created = Cluster::Create(TwoNodes());
  ASSERT_TRUE(created.ok()) << created.status().message();
  Cluster cluster = std::move(created).value();
  ASSERT_EQ(cluster.node_count(), 2u);
  EXPECT_EQ(cluster.node(0).devices.size(), 4u);
  EXPECT_EQ(cluster.node(0).devices[3].nvlink_group, 1u);

  // A 2 x 4-GPU gang, borrowing prod's unused guarantee, takes both nodes.
  const std::vector<Job> pending = {GpuJob(cluster, 1, "research", 2, 4)};
  const Engine engine;
  const Plan plan = engine.Schedule(cluster, pending, 10);
  ASSERT_EQ(plan.binds.size(), 1u);
  EXPECT_EQ(plan.binds[0].job, 1u);
  EXPECT_TRUE(plan.unplaced.empty());
  ASSERT_TRUE(cluster.Apply(plan, pending).ok());
  ASSERT_TRUE(cluster.CheckInvariants().ok());
  const std::vector<RunningJob> running = cluster.running();
  ASSERT_EQ(running.size(), 1u);
  EXPECT_EQ(running[0].job.id, 1u);
  EXPECT_EQ(cluster.Describe(running[0].allocation.tasks[0]).find("a-"), 0u);
  for (const NodeView& node : cluster.nodes()) {
    EXPECT_EQ(node.tasks, 1u) << node.name;
    for (const DeviceView& device : node.devices) EXPECT_EQ(device.free.value(), 0);
  }
  const std::vector<QueueView> queues = cluster.queues();
  ASSERT_EQ(queues.size(), 3u);
  for (const QueueView& queue : queues) {
    EXPECT_EQ(queue.leaf, queue.name != "all");
    EXPECT_EQ(queue.parent, queue.leaf ? "all" : "");
    EXPECT_EQ(queue.gpu_milli_nominal, (queue.leaf ? 4 : 8) * kMilliPerGpu);
    EXPECT_EQ(queue.gpu_milli_used, queue.name == "prod" ? 0 : 8 * kMilliPerGpu);
  }

  // A 1-GPU job of prod waits while the gang holds every GPU, and starts once the gang ends.
  const std::vector<Job> still = {GpuJob(cluster, 2, "prod", 1, 1)};
  const Plan blocked = engine.Schedule(cluster, still, 500);
  EXPECT_TRUE(blocked.binds.empty());
  ASSERT_EQ(blocked.unplaced.size(), 1u);
  EXPECT_FALSE(blocked.unplaced[0].reason.Describe().empty());
  const Status ended = cluster.Unbind(1, 1000);
  ASSERT_TRUE(ended.ok()) << ended.message();
  EXPECT_EQ(cluster.FindRunning(1), nullptr);
  const Plan next = engine.Schedule(cluster, still, 1000);
  ASSERT_EQ(next.binds.size(), 1u);
  ASSERT_TRUE(cluster.Apply(next, still).ok());
  ASSERT_NE(cluster.FindRunning(2), nullptr);
  EXPECT_TRUE(cluster.CheckInvariants().ok());
}

TEST(Library, BadInputIsRefusedAndChangesNothing) {
  ClusterSpec spec = TwoNodes();
  spec.queues[1].parent = "nowhere";
  const Result<Cluster> bad = Cluster::Create(spec);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("nowhere"), std::string::npos);

  Cluster cluster = Cluster::Create(TwoNodes()).value();
  EXPECT_EQ(cluster.Unbind(42, 0).code(), StatusCode::kNotFound);
  EXPECT_FALSE(cluster.SetCordoned(7, true).ok());
  ASSERT_TRUE(cluster.SetCordoned(*cluster.FindNode("a-1"), true).ok());
  EXPECT_TRUE(cluster.node(1).cordoned);
  // A bind the capacity cannot hold is refused whole.
  Job big = GpuJob(cluster, 3, "prod", 1, 4);
  Allocation too_much;
  too_much.tasks.push_back(TaskAllocation{});
  EXPECT_FALSE(cluster.Bind(big, too_much, 0).ok());
  EXPECT_TRUE(cluster.running().empty());
  EXPECT_TRUE(cluster.CheckInvariants().ok());
}

}  // namespace
}  // namespace arbiter
