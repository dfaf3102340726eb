// CheckPlan: a plan that breaks what no cycle may decide is caught, each violation named, with the
// cycle's state. (Every plan the engine makes in the tests passes it: testing::RunCycle, the
// simulator's tests with SimOptions::check_invariants, the servers with --check-invariants.)
#include <gtest/gtest.h>

#include <string>

#include "arbiter/engine.h"
#include "testing/builders.h"

namespace arbiter {
namespace {

using testing::Add;
using testing::Cluster;
using testing::GpuJob;
using testing::MakeState;
using testing::Nodes;

::testing::AssertionResult HasSubstr(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << text << "' does not contain '" << part << "'";
}

ClusterSpec OneNode(std::optional<std::int64_t> max_gpus = {}) {
  ClusterSpec spec = Cluster();
  Add(spec, Nodes("n", 1, "H800", 8));
  if (max_gpus) spec.queues[0].quota["gpu"].max = MilliGpu(*max_gpus * kMilliPerGpu);
  return spec;
}

TEST(CheckPlan, ABindBeyondAMaxIsCaught) {
  ClusterState loose = MakeState(OneNode());
  const std::vector<Job> pending = {GpuJob(1, 1, 8000)};
  const Plan plan = Engine().Schedule(loose, pending, 0);
  ASSERT_EQ(plan.binds.size(), 1u);
  EXPECT_TRUE(CheckPlan(loose, pending, plan).ok());
  // The same plan against a queue capped at 4 GPUs.
  ClusterState capped = MakeState(OneNode(4));
  const Status st = CheckPlan(capped, pending, plan);
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(HasSubstr(st.message(), "job 1 is started beyond its quota (queue")) << st.message();
  EXPECT_TRUE(HasSubstr(st.message(), "gpu: 8 of 4)")) << st.message();
  EXPECT_TRUE(HasSubstr(st.message(), "The state: 0 running, 1 pending, 1 bound")) << st.message();
}

TEST(CheckPlan, AnEvictionOfNonPreemptibleWorkAndADeviceGivenTwiceAreCaught) {
  ClusterState state = MakeState(OneNode());
  Job kept = GpuJob(1, 1, 8000);
  kept.priority_class = 0;  // P0: not preemptible
  testing::StartOn(state, kept, "n-0", 0);
  const std::vector<Job> pending = {GpuJob(2, 1, 8000)};
  Plan plan;
  plan.binds.push_back({2, 0, state.FindRunning(1)->allocation, 0});  // its devices, again
  Status st = CheckPlan(state, pending, plan);
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(HasSubstr(st.message(), "job 2 is given device 0 of node n-0 beyond its capacity"))
      << st.message();
  Eviction e;
  e.job = 1;
  e.preemptor = 2;
  plan.evictions.push_back(e);
  st = CheckPlan(state, pending, plan);
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(HasSubstr(st.message(), "job 1 is not preemptible but is evicted")) << st.message();
  EXPECT_FALSE(HasSubstr(st.message(), "beyond its capacity")) << st.message();
}

}  // namespace
}  // namespace arbiter
