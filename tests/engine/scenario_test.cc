// Scheduling scenarios: a cluster, queues and jobs in; binds and reasons out.
#include <gtest/gtest.h>

#include <set>

#include "arbiter/engine.h"
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
using testing::NodesOf;
using testing::RunCycle;

// Occupies `gpus` whole GPUs on the named node with a running job.
void Occupy(ClusterState& state, JobId id, const std::string& node, int gpus,
            int first_device = 0) {
  testing::StartOn(state, GpuJob(id, 1, gpus * kMilliPerGpu), node,
                   static_cast<std::uint32_t>(first_device));
}

TEST(Scenario, EightGpuGangStaysOnOneNodeWhenOneNodeHoldsIt) {
  ClusterSpec spec = Cluster({"leaf"});
  Add(spec, Nodes("a", 2, "H800", 8, 0, {"leaf-0"}));
  Add(spec, Nodes("b", 2, "H800", 8, 0, {"leaf-1"}));
  ClusterState state = MakeState(spec);
  // Leave 4 free on each node of leaf-0 and a-... so 8 free GPUs are spread, but b-1 is whole.
  Occupy(state, 100, "a-0", 4);
  Occupy(state, 101, "a-1", 4);
  Occupy(state, 102, "b-0", 4);
  Plan plan = RunCycle(state, {GpuJob(1, 8, 1000)});
  const Bind* bind = FindBind(plan, 1);
  ASSERT_NE(bind, nullptr);
  ASSERT_EQ(NodesOf(*bind).size(), 1u);
  EXPECT_EQ(state.node(NodesOf(*bind)[0]).name, "b-1");
}

TEST(Scenario, GangUsesTheSmallestDomainThatHoldsIt) {
  ClusterSpec spec = Cluster({"leaf"});
  Add(spec, Nodes("a", 2, "H800", 8, 0, {"leaf-0"}));
  Add(spec, Nodes("b", 2, "H800", 8, 0, {"leaf-1"}));
  ClusterState state = MakeState(spec);
  Occupy(state, 100, "a-0", 4);  // leaf-0 has 12 free, leaf-1 16
  Occupy(state, 101, "b-0", 2);  // leaf-1 has 14 free
  // 12 GPUs as 3 tasks x 4: no node holds it; leaf-0 (12 free) is the tightest leaf that does.
  Plan plan = RunCycle(state, {GpuJob(1, 3, 4000)});
  const Bind* bind = FindBind(plan, 1);
  ASSERT_NE(bind, nullptr);
  for (NodeId n : NodesOf(*bind)) EXPECT_EQ(state.node(n).name.substr(0, 1), "a");
}

TEST(Scenario, RequiredTopologyGangWaitsRatherThanSpreads) {
  ClusterSpec spec = Cluster({"leaf"});
  Add(spec, Nodes("a", 2, "H800", 8, 0, {"leaf-0"}));
  Add(spec, Nodes("b", 2, "H800", 8, 0, {"leaf-1"}));
  ClusterState state = MakeState(spec);
  Occupy(state, 100, "a-0", 8);
  Occupy(state, 101, "b-0", 8);  // each leaf has 8 free: 16 in all, but no leaf holds 16
  Job required = GpuJob(1, 2, 8000);
  required.topology = {state.topology().LevelIndex("leaf"), ConstraintMode::kRequired};
  Job spread = GpuJob(2, 2, 8000);
  spread.submit_time = 1;  // after the required job
  Plan plan = RunCycle(state, {required});
  const Unplaced* u = FindUnplaced(plan, 1);
  ASSERT_NE(u, nullptr);
  EXPECT_EQ(u->reason.stage, Stage::kPlace);
  EXPECT_EQ(u->reason.cause, Cause::kTopology);
  EXPECT_EQ(u->reason.verdict, Verdict::kWait);
  // Without the requirement the same gang spreads over both leaves.
  Plan plan2 = RunCycle(state, {spread});
  const Bind* b = FindBind(plan2, 2);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(NodesOf(*b).size(), 2u);
}

TEST(Scenario, RequiredNvlinkKeepsATaskInsideOneGroup) {
  ClusterSpec spec = Cluster();
  Add(spec, Nodes("n", 1, "A100", 8, 4));  // groups {0..3} {4..7}
  ClusterState state = MakeState(spec);
  Occupy(state, 100, "n-0", 2, 0);  // group 0: 2 free, group 1: 4 free
  Occupy(state, 101, "n-0", 1, 4);  // group 1: 3 free
  Job job = GpuJob(1, 1, 4000);
  job.topology = {state.topology().nvlink_level(), ConstraintMode::kRequired};
  Plan plan = RunCycle(state, {job});
  ASSERT_NE(FindUnplaced(plan, 1), nullptr);  // 5 free GPUs, but no group has 4
  // An unconstrained 4-GPU task spans the two groups.
  Plan plan2 = RunCycle(state, {GpuJob(2, 1, 4000)});
  ASSERT_NE(FindBind(plan2, 2), nullptr);
}

TEST(Scenario, TaskFillsTheTightestNvlinkGroup) {
  ClusterSpec spec = Cluster();
  Add(spec, Nodes("n", 1, "A100", 8, 4));
  ClusterState state = MakeState(spec);
  Occupy(state, 100, "n-0", 2, 0);  // group 0 has devices 2, 3 free
  Plan plan = RunCycle(state, {GpuJob(1, 1, 2000), GpuJob(2, 1, 4000)});
  const Bind* two = FindBind(plan, 1);
  const Bind* four = FindBind(plan, 2);
  ASSERT_NE(two, nullptr);
  ASSERT_NE(four, nullptr);
  std::vector<std::uint32_t> d2, d4;
  for (const DeviceShare& s : two->allocation.tasks[0].devices) d2.push_back(s.device);
  for (const DeviceShare& s : four->allocation.tasks[0].devices) d4.push_back(s.device);
  EXPECT_EQ(d2, (std::vector<std::uint32_t>{2, 3}));
  EXPECT_EQ(d4, (std::vector<std::uint32_t>{4, 5, 6, 7}));
}

TEST(Scenario, FractionalTasksShareADeviceUpToOneGpu) {
  ClusterSpec spec = Cluster();
  Add(spec, Nodes("n", 1, "L40S", 1));
  ClusterState state = MakeState(spec);
  Plan plan = RunCycle(state, {GpuJob(1, 1, 400), GpuJob(2, 1, 500), GpuJob(3, 1, 200)});
  ASSERT_NE(FindBind(plan, 1), nullptr);
  ASSERT_NE(FindBind(plan, 2), nullptr);
  const Unplaced* u = FindUnplaced(plan, 3);  // 400 + 500 + 200 > 1000
  ASSERT_NE(u, nullptr);
  EXPECT_EQ(u->reason.cause, Cause::kInsufficientGpu);
  EXPECT_EQ(state.node(0).devices[0].free, MilliGpu(100));
  Plan plan2 = RunCycle(state, {GpuJob(4, 1, 100)});
  ASSERT_NE(FindBind(plan2, 4), nullptr);
  EXPECT_EQ(state.node(0).devices[0].free, MilliGpu(0));
}

TEST(Scenario, ShareGoesToThePartlyUsedDeviceWithLeastFree) {
  ClusterSpec spec = Cluster();
  Add(spec, Nodes("n", 2, "L40S", 2));
  ClusterState state = MakeState(spec);
  RunCycle(state, {GpuJob(1, 1, 400)});  // one device at 600 free
  RunCycle(state, {GpuJob(2, 1, 700)});  // does not fit there: a second device, 300 free
  Plan plan = RunCycle(state, {GpuJob(3, 1, 250)});
  const Bind* b = FindBind(plan, 3);
  ASSERT_NE(b, nullptr);
  const DeviceShare& share = b->allocation.tasks[0].devices[0];
  const NodeState& node = state.node(b->allocation.tasks[0].node);
  EXPECT_EQ(node.devices[share.device].free, MilliGpu(50));  // the 300-free device, now 50
}

TEST(Scenario, SmallJobsPackAndLeaveWholeNodesForBigOnes) {
  ClusterSpec spec = Cluster();
  Add(spec, Nodes("n", 2, "H800", 8));
  ClusterState state = MakeState(spec);
  RunCycle(state, {GpuJob(1, 1, 1000), GpuJob(2, 1, 1000), GpuJob(3, 1, 2000)});
  // All three small jobs share one node, so an 8-GPU job still fits on the other.
  Plan plan = RunCycle(state, {GpuJob(4, 1, 8000)});
  ASSERT_NE(FindBind(plan, 4), nullptr);
}

TEST(Scenario, FilterReasonsCountNodesPerCause) {
  ClusterSpec spec = Cluster();
  Add(spec, Nodes("tainted", 2, "H800", 8));
  Add(spec, Nodes("cordoned", 1, "H800", 8));
  Add(spec, Nodes("small", 1, "H800", 2));
  Add(spec, Nodes("other", 1, "A100", 8));
  for (NodeSpec& n : spec.nodes) {
    if (n.name.rfind("tainted", 0) == 0)
      n.taints.push_back({"dedicated", "inference", TaintEffect::kNoSchedule});
    if (n.name.rfind("cordoned", 0) == 0) n.cordoned = true;
  }
  ClusterState state = MakeState(spec);
  Job job = GpuJob(1, 1, 4000);
  job.gpu_types = GpuTypeSet::Of(*state.FindGpuType("H800"));
  Plan plan = RunCycle(state, {job});
  const Unplaced* u = FindUnplaced(plan, 1);
  ASSERT_NE(u, nullptr);
  EXPECT_EQ(u->reason.stage, Stage::kFilter);
  EXPECT_EQ(u->reason.verdict, Verdict::kWait);  // the cordon may be lifted
  EXPECT_EQ(u->reason.Describe(),
            "filter: 0/5 nodes fit: 2 untolerated taint, 1 node cordoned, 1 no GPU of an accepted "
            "type, 1 insufficient GPU");
  // Tolerating the taint makes it fit.
  job.tolerations.push_back({"dedicated", Toleration::Op::kEqual, "inference", std::nullopt});
  Plan plan2 = RunCycle(state, {job});
  const Bind* b = FindBind(plan2, 1);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(state.node(b->allocation.tasks[0].node).name.substr(0, 7), "tainted");
}

TEST(Scenario, NodeSelectorAndGpuTypesChooseNodes) {
  ClusterSpec spec = Cluster();
  Add(spec, Nodes("a100", 1, "A100", 8));
  Add(spec, Nodes("h800", 2, "H800", 8));
  spec.nodes[2].labels["zone"] = "east";
  ClusterState state = MakeState(spec);
  Job selected = GpuJob(1, 1, 1000);
  selected.node_selector["zone"] = "east";
  Job a100 = GpuJob(2, 1, 1000);
  a100.gpu_types = GpuTypeSet::Of(*state.FindGpuType("A100"));
  Plan plan = RunCycle(state, {selected, a100});
  ASSERT_NE(FindBind(plan, 1), nullptr);
  ASSERT_NE(FindBind(plan, 2), nullptr);
  EXPECT_EQ(state.node(FindBind(plan, 1)->allocation.tasks[0].node).name, spec.nodes[2].name);
  EXPECT_EQ(state.node(FindBind(plan, 2)->allocation.tasks[0].node).name, "a100-0");
}

TEST(Scenario, SecondAcceptedTypeIsUsedWhenTheFirstIsFull) {
  ClusterSpec spec = Cluster();
  Add(spec, Nodes("h800", 1, "H800", 8));
  Add(spec, Nodes("a100", 1, "A100", 8));
  ClusterState state = MakeState(spec);
  Occupy(state, 100, "h800-0", 8);
  Job job = GpuJob(1, 1, 4000);
  job.gpu_types.Add(*state.FindGpuType("H800"));
  job.gpu_types.Add(*state.FindGpuType("A100"));
  Plan plan = RunCycle(state, {job});
  const Bind* b = FindBind(plan, 1);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(state.gpu_type_name(b->allocation.gpu_type), "A100");
}

TEST(Scenario, JobThatCanNeverFitIsUnresolvable) {
  ClusterSpec spec = Cluster();
  Add(spec, Nodes("n", 4, "H800", 8));
  ClusterState state = MakeState(spec);
  Plan plan = RunCycle(state, {GpuJob(1, 1, 16000)});
  const Unplaced* u = FindUnplaced(plan, 1);
  ASSERT_NE(u, nullptr);
  EXPECT_EQ(u->reason.verdict, Verdict::kNever);
  EXPECT_EQ(u->reason.cause, Cause::kInsufficientGpu);
  // A gang larger than the cluster can never fit either, although each task fits a node.
  Plan plan2 = RunCycle(state, {GpuJob(2, 5, 8000)});
  ASSERT_NE(FindUnplaced(plan2, 2), nullptr);
  EXPECT_EQ(FindUnplaced(plan2, 2)->reason.verdict, Verdict::kNever);
}

TEST(Scenario, HigherPriorityClassGoesFirst) {
  ClusterSpec spec = Cluster();
  Add(spec, Nodes("n", 1, "H800", 8));
  ClusterState state = MakeState(spec);
  Job low = GpuJob(1, 1, 8000);
  low.priority_class = 2;  // P2, submitted first
  Job high = GpuJob(2, 1, 8000);
  high.priority_class = 0;  // P0
  high.submit_time = 1000;
  Plan plan = RunCycle(state, {low, high}, 2000);
  EXPECT_NE(FindBind(plan, 2), nullptr);
  EXPECT_NE(FindUnplaced(plan, 1), nullptr);
}

TEST(Scenario, AgingLetsAnOldLowPriorityJobOvertake) {
  ClusterSpec spec = Cluster();
  Add(spec, Nodes("n", 1, "H800", 8));
  const Millis day = 24 * 3600 * kMillisPerSecond;
  const Millis now = 10 * day;
  auto run = [&](Millis old_job_age) {
    ClusterState state = MakeState(spec);
    Job old_low = GpuJob(1, 1, 8000);
    old_low.priority_class = 2;  // P2
    old_low.submit_time = now - old_job_age;
    Job new_high = GpuJob(2, 1, 8000);
    new_high.priority_class = 1;  // P1
    new_high.submit_time = now;
    return RunCycle(state, {new_high, old_low}, now);
  };
  // Default weights: P1 leads P2 by 900; a full max_age (7 days) of waiting is worth 1000.
  Plan young = run(3600 * kMillisPerSecond);
  EXPECT_NE(FindBind(young, 2), nullptr);
  Plan old = run(7 * day);
  EXPECT_NE(FindBind(old, 1), nullptr);
  EXPECT_NE(FindUnplaced(old, 2), nullptr);
}

TEST(Scenario, SamePlanForTheSameInputs) {
  ClusterSpec spec = Cluster({"leaf"});
  Add(spec, Nodes("a", 4, "H800", 8, 4, {"leaf-0"}));
  Add(spec, Nodes("b", 4, "H800", 8, 4, {"leaf-1"}));
  std::vector<Job> jobs;
  for (JobId id = 1; id <= 40; ++id) {
    jobs.push_back(GpuJob(id, static_cast<std::int32_t>(1 + id % 3),
                          (id % 4 == 0) ? 500 : 1000 * static_cast<std::int64_t>(1 + id % 4)));
  }
  ClusterState fresh = MakeState(spec);
  ClusterState used = MakeState(spec);
  // `used` has been through a cycle whose binds were undone.
  Plan warmup = RunCycle(used, jobs);
  for (const Bind& b : warmup.binds) ASSERT_TRUE(used.Unbind(b.job, 0).ok());
  Engine engine;
  Plan a = engine.Schedule(fresh, jobs, 0);
  Plan b = engine.Schedule(used, jobs, 0);
  ASSERT_EQ(a.binds.size(), b.binds.size());
  for (std::size_t i = 0; i < a.binds.size(); ++i) {
    EXPECT_EQ(a.binds[i].job, b.binds[i].job);
    ASSERT_EQ(a.binds[i].allocation.tasks.size(), b.binds[i].allocation.tasks.size());
    for (std::size_t t = 0; t < a.binds[i].allocation.tasks.size(); ++t) {
      EXPECT_EQ(a.binds[i].allocation.tasks[t].node, b.binds[i].allocation.tasks[t].node);
      ASSERT_EQ(a.binds[i].allocation.tasks[t].devices.size(),
                b.binds[i].allocation.tasks[t].devices.size());
      for (std::size_t d = 0; d < a.binds[i].allocation.tasks[t].devices.size(); ++d) {
        EXPECT_EQ(a.binds[i].allocation.tasks[t].devices[d].device,
                  b.binds[i].allocation.tasks[t].devices[d].device);
      }
    }
  }
}

TEST(Scenario, AffinityAndAntiAffinityBetweenJobs) {
  ClusterSpec spec = Cluster();
  Add(spec, Nodes("n", 3, "H800", 8));
  ClusterState state = MakeState(spec);
  Job cache = GpuJob(1, 1, 1000);
  cache.labels["app"] = "cache";
  RunCycle(state, {cache});
  const NodeId cache_node = state.FindRunning(1)->allocation.tasks[0].node;
  Job near = GpuJob(2, 1, 1000);
  near.affinity.push_back({{{"app", "cache"}}, state.topology().node_level(), false, true});
  Job away = GpuJob(3, 1, 1000);
  away.affinity.push_back({{{"app", "cache"}}, state.topology().node_level(), true, true});
  Plan plan = RunCycle(state, {near, away});
  ASSERT_NE(FindBind(plan, 2), nullptr);
  ASSERT_NE(FindBind(plan, 3), nullptr);
  EXPECT_EQ(FindBind(plan, 2)->allocation.tasks[0].node, cache_node);
  EXPECT_NE(FindBind(plan, 3)->allocation.tasks[0].node, cache_node);
  // Affinity to something that is not running waits, with the reason.
  Job lonely = GpuJob(4, 1, 1000);
  lonely.affinity.push_back({{{"app", "db"}}, state.topology().node_level(), false, true});
  Plan plan2 = RunCycle(state, {lonely});
  ASSERT_NE(FindUnplaced(plan2, 4), nullptr);
  EXPECT_EQ(FindUnplaced(plan2, 4)->reason.cause, Cause::kAffinity);
}

TEST(Scenario, InvalidJobsAreRejectedWithTheField) {
  ClusterSpec spec = Cluster();
  Add(spec, Nodes("n", 1, "H800", 8));
  ClusterState state = MakeState(spec);
  Job bad = GpuJob(1, 1, 1500);  // more than one device but not whole
  Job empty = GpuJob(2, 0, 1000);
  Plan plan = RunCycle(state, {bad, empty, GpuJob(1, 1, 1000)});
  ASSERT_EQ(plan.binds.size(), 0u);
  ASSERT_EQ(plan.unplaced.size(), 3u);
  for (const Unplaced& u : plan.unplaced) {
    EXPECT_EQ(u.reason.stage, Stage::kValidate);
    EXPECT_EQ(u.reason.verdict, Verdict::kNever);
  }
}

TEST(Scenario, EveryStageIsNamedAndTimedWithAnInjectedClock) {
  ClusterSpec spec = Cluster();
  Add(spec, Nodes("n", 1, "H800", 8));
  ClusterState state = MakeState(spec);
  EngineOptions options;
  std::int64_t ticks = 0;
  options.clock_micros = [&ticks] { return ticks += 10; };
  Plan plan = RunCycle(state, {GpuJob(1, 1, 1000), GpuJob(2, 1, 16000)}, 0, options);
  std::set<std::string> names;
  for (const StageTiming& t : plan.timings) {
    names.insert(StageName(t.stage));
    EXPECT_GE(t.micros, 0);
  }
  EXPECT_EQ(names, (std::set<std::string>{"order", "validate", "quota", "place", "explain",
                                          "backfill", "preempt"}));
  for (const StageTiming& t : plan.timings) {
    if (t.stage == Stage::kPlace) {
      EXPECT_EQ(t.calls, 2);
      EXPECT_EQ(t.micros, 20);
    }
  }
}

TEST(Scenario, GangIsAllOrNothing) {
  ClusterSpec spec = Cluster();
  Add(spec, Nodes("n", 2, "H800", 8));
  ClusterState state = MakeState(spec);
  Occupy(state, 100, "n-0", 4);
  // Needs 3 nodes' worth of 4-GPU tasks where only 12 are free: none placed.
  Plan plan = RunCycle(state, {GpuJob(1, 4, 4000)});
  EXPECT_EQ(plan.binds.size(), 0u);
  ASSERT_NE(FindUnplaced(plan, 1), nullptr);
  EXPECT_EQ(FindUnplaced(plan, 1)->reason.cause, Cause::kGang);
  EXPECT_EQ(state.running().size(), 1u);
}

}  // namespace
}  // namespace arbiter
