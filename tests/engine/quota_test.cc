// Quota: nominal (guaranteed) quota, borrowing and lending limits, max, in a queue tree.
#include <gtest/gtest.h>

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
using testing::OneGpuJobs;
using testing::RunCycle;

QuotaSpec Quota(std::int64_t nominal, std::optional<std::int64_t> borrowing = {},
                std::optional<std::int64_t> lending = {}, std::optional<std::int64_t> max = {}) {
  QuotaSpec q;
  q.nominal = MilliGpu(nominal * kMilliPerGpu);
  if (borrowing) q.borrowing_limit = MilliGpu(*borrowing * kMilliPerGpu);
  if (lending) q.lending_limit = MilliGpu(*lending * kMilliPerGpu);
  if (max) q.max = MilliGpu(*max * kMilliPerGpu);
  return q;
}

// A cohort "org" with leaves "a" and "b" on 16 H800 GPUs.
ClusterSpec TwoTeams(QuotaSpec a, QuotaSpec b) {
  ClusterSpec spec = Cluster();
  Add(spec, Nodes("n", 2, "H800", 8));
  spec.queues = {testing::Queue("org"), testing::Queue("a", "org"), testing::Queue("b", "org")};
  spec.queues[1].quota["H800"] = a;
  spec.queues[2].quota["H800"] = b;
  return spec;
}

int CountPlaced(const Plan& plan) { return static_cast<int>(plan.binds.size()); }

TEST(Quota, LendingLimitCapsWhatSiblingsMayBorrow) {
  ClusterState state = MakeState(TwoTeams(Quota(8, 4), Quota(8, std::nullopt, 2)));
  Plan plan = RunCycle(state, OneGpuJobs(state, "a", 1, 14));
  EXPECT_EQ(CountPlaced(plan), 10);  // 8 nominal + the 2 that b lends
  const Unplaced* u = FindUnplaced(plan, 11);
  ASSERT_NE(u, nullptr);
  EXPECT_EQ(u->reason.stage, Stage::kQuota);
  EXPECT_EQ(u->reason.cause, Cause::kQuotaCohort);
  // b still gets all of what it keeps back.
  Plan plan2 = RunCycle(state, OneGpuJobs(state, "b", 100, 6));
  EXPECT_EQ(CountPlaced(plan2), 6);
}

TEST(Quota, BorrowingLimitCapsUseAboveNominal) {
  ClusterState state = MakeState(TwoTeams(Quota(8, 4), Quota(8)));
  Plan plan = RunCycle(state, OneGpuJobs(state, "a", 1, 14));
  EXPECT_EQ(CountPlaced(plan), 12);
  const Unplaced* u = FindUnplaced(plan, 13);
  ASSERT_NE(u, nullptr);
  EXPECT_EQ(u->reason.cause, Cause::kQuotaBorrowingLimit);
  EXPECT_NE(u->reason.Describe().find("queue a"), std::string::npos) << u->reason.Describe();
}

TEST(Quota, MaxIsAHardCap) {
  ClusterState state = MakeState(TwoTeams(Quota(4, std::nullopt, std::nullopt, 6), Quota(12)));
  Plan plan = RunCycle(state, OneGpuJobs(state, "a", 1, 10));
  EXPECT_EQ(CountPlaced(plan), 6);
  EXPECT_EQ(FindUnplaced(plan, 7)->reason.cause, Cause::kQuotaMax);
  EXPECT_EQ(FindUnplaced(plan, 7)->reason.verdict, Verdict::kWait);
  // A single job above max can never pass.
  Job big = GpuJob(50, 1, 8000);
  big.queue = *state.FindQueue("a");
  Plan plan2 = RunCycle(state, {big});
  EXPECT_EQ(FindUnplaced(plan2, 50)->reason.verdict, Verdict::kNever);
}

TEST(Quota, GuaranteedQuotaIsServedBeforeBorrowingInACycle) {
  ClusterState state = MakeState(TwoTeams(Quota(8), Quota(8)));
  std::vector<Job> jobs = OneGpuJobs(state, "a", 1, 16);
  for (Job& j : jobs) j.priority_class = 0;                         // a's jobs are P0
  for (Job& j : OneGpuJobs(state, "b", 100, 8)) jobs.push_back(j);  // b's are P1
  Plan plan = RunCycle(state, jobs);
  int a = 0, b = 0;
  for (const Bind& bind : plan.binds) (bind.job < 100 ? a : b)++;
  EXPECT_EQ(a, 8);
  EXPECT_EQ(b, 8);  // b's guarantee is not taken by a's higher-priority borrowing
}

TEST(Quota, WithinNominalIsNeverRefusedByQuota) {
  ClusterSpec spec = TwoTeams(Quota(8), Quota(8));
  spec.queues[2].reclaim = false;  // b waits instead of reclaiming (see the preemption tests)
  ClusterState state = MakeState(spec);
  RunCycle(state, OneGpuJobs(state, "a", 1, 16));  // a borrows all of b's idle quota
  EXPECT_EQ(state.usage(*state.FindQueue("a"), 0), 16000);
  engine::QuotaCheck check = engine::CheckQuota(state, *state.FindQueue("b"), 0, 1000);
  EXPECT_TRUE(check.ok);
  EXPECT_FALSE(check.borrows);
  // The capacity is what is missing now.
  Plan plan = RunCycle(state, OneGpuJobs(state, "b", 100, 1));
  ASSERT_NE(FindUnplaced(plan, 100), nullptr);
  EXPECT_EQ(FindUnplaced(plan, 100)->reason.stage, Stage::kFilter);
  EXPECT_TRUE(plan.evictions.empty());
}

TEST(Quota, AllGpusResourceLimitsEveryTypeTogether) {
  ClusterSpec spec = Cluster();
  Add(spec, Nodes("h", 1, "H800", 8));
  Add(spec, Nodes("a", 1, "A100", 8));
  spec.queues[0].quota["gpu"] = Quota(10);
  ClusterState state = MakeState(spec);
  std::vector<Job> jobs;
  for (JobId id = 1; id <= 4; ++id) jobs.push_back(GpuJob(id, 1, 4000));
  Plan plan = RunCycle(state, jobs);
  EXPECT_EQ(CountPlaced(plan), 2);  // 8 of 10 GPUs; a third 4-GPU job would make 12
}

TEST(Quota, UndeclaredResourcesAreNotLimited) {
  ClusterSpec spec = Cluster();
  Add(spec, Nodes("h", 2, "H800", 8));
  ClusterState state = MakeState(spec);
  Plan plan = RunCycle(state, OneGpuJobs(state, "default", 1, 16));
  EXPECT_EQ(CountPlaced(plan), 16);
}

// A max alone (examples/cluster.yaml plus `gpu: {max: 16}` under one queue) caps that queue only:
// it never makes the resource limited in the tree, where the tree's nominal quota for it would
// be 0 and nothing would ever fit.
TEST(Quota, AMaxAloneCapsItsQueueAndNeverTheTree) {
  ClusterSpec spec = TwoTeams(Quota(8), Quota(8));
  QuotaSpec capped;
  capped.max = MilliGpu(6 * kMilliPerGpu);
  spec.queues[1].quota["gpu"] = capped;  // a: at most 6 GPUs of any model
  ClusterState state = MakeState(spec);
  EXPECT_FALSE(state.quota(*state.FindQueue("b"), 0).limited);
  EXPECT_FALSE(state.quota(*state.FindQueue("org"), 0).limited);
  Plan plan = RunCycle(state, OneGpuJobs(state, "a", 1, 10));
  EXPECT_EQ(CountPlaced(plan), 6);
  ASSERT_NE(FindUnplaced(plan, 7), nullptr);
  EXPECT_EQ(FindUnplaced(plan, 7)->reason.cause, Cause::kQuotaMax);
  EXPECT_EQ(FindUnplaced(plan, 7)->reason.verdict, Verdict::kWait);
  // b is untouched by a's cap: all of its own 8, and what a leaves.
  Plan plan2 = RunCycle(state, OneGpuJobs(state, "b", 100, 10));
  EXPECT_EQ(CountPlaced(plan2), 10);
  // Above the max, never.
  Job big = GpuJob(50, 1, 7000);
  big.queue = *state.FindQueue("a");
  ClusterState fresh = MakeState(spec);
  Plan plan3 = RunCycle(fresh, {big});
  ASSERT_NE(FindUnplaced(plan3, 50), nullptr);
  EXPECT_EQ(FindUnplaced(plan3, 50)->reason.verdict, Verdict::kNever);
}

// A max on a parent caps its subtree, even where a child is within its own nominal quota.
TEST(Quota, AMaxAboveCapsTheSubtreeWhateverTheGuaranteesBelow) {
  ClusterSpec spec = TwoTeams(Quota(8), Quota(8));
  QuotaSpec capped;
  capped.max = MilliGpu(10 * kMilliPerGpu);
  spec.queues[0].quota["H800"] = capped;  // org: at most 10 H800
  ClusterState state = MakeState(spec);
  std::vector<Job> jobs = OneGpuJobs(state, "a", 1, 8);
  for (Job& j : OneGpuJobs(state, "b", 100, 8)) jobs.push_back(j);
  Plan plan = RunCycle(state, jobs);
  EXPECT_EQ(CountPlaced(plan), 10);
}

// A job that accepts any model, where quota rules one model out for now and the nodes of the
// other are full (repros/repro-accepted-type-*.yaml): the nodes of the refused model are counted
// under the quota's cause, not as lacking an accepted type, and the reason names the limit.
TEST(Quota, ANodeOfAModelQuotaRefusesIsCountedUnderTheQuota) {
  ClusterSpec spec = Cluster();
  Add(spec, Nodes("h", 1, "H800", 8));
  Add(spec, Nodes("a", 1, "A100", 1));
  spec.queues[0].quota["H800"] = Quota(1);
  spec.queues[0].quota["A100"] = Quota(2);
  ClusterState state = MakeState(spec);
  Job h800 = GpuJob(1, 1, 1000);
  h800.gpu_types.Add(*state.FindGpuType("H800"));
  Job a100 = GpuJob(2, 1, 1000);
  a100.gpu_types.Add(*state.FindGpuType("A100"));
  ASSERT_EQ(CountPlaced(RunCycle(state, {h800, a100})), 2);
  Plan plan = RunCycle(state, {GpuJob(3, 1, 1000)});
  const Unplaced* u = FindUnplaced(plan, 3);
  ASSERT_NE(u, nullptr);
  EXPECT_EQ(u->reason.verdict, Verdict::kWait);
  for (const CauseCount& c : u->reason.node_counts) {
    EXPECT_NE(c.cause, Cause::kGpuType) << u->reason.Describe();
  }
  EXPECT_NE(u->reason.detail.find("H800"), std::string::npos) << u->reason.Describe();
  EXPECT_NE(u->reason.Describe().find("1 insufficient GPU"), std::string::npos)
      << u->reason.Describe();
}

// A job that fits within its guarantee only on a model it can never fit on (a task of 8 GPUs,
// nodes of 4 H800), and on another model only by borrowing (A100, its sibling's idle quota): it
// is tried on the borrowable model in the borrowing pass, not told it can never fit.
TEST(Quota, AJobThatCanFitOnlyByBorrowingAnotherModelIsTriedOnIt) {
  ClusterSpec spec = Cluster();
  Add(spec, Nodes("h", 2, "H800", 4));
  Add(spec, Nodes("a", 1, "A100", 8));
  spec.queues = {testing::Queue("org"), testing::Queue("a", "org"), testing::Queue("b", "org")};
  spec.queues[1].quota["H800"] = Quota(8);
  spec.queues[2].quota["A100"] = Quota(8);
  ClusterState state = MakeState(spec);
  Job job = GpuJob(1, 1, 8000);
  job.queue = *state.FindQueue("a");
  Plan plan = RunCycle(state, {job});
  ASSERT_EQ(CountPlaced(plan), 1) << (plan.unplaced.empty() ? std::string()
                                                            : plan.unplaced[0].reason.Describe());
  EXPECT_EQ(state.gpu_type_name(plan.binds[0].allocation.gpu_type), "A100");
}

// What a sibling keeps back beyond its lending limit is never lent, whatever runs: a job larger
// than the tree's quota less that can never pass, and is told so (the verdict oracle found it
// told to wait; tests/property/verdict_oracle_test.cc, seed 1001).
TEST(Quota, ARequestAboveWhatTheTreeCanEverLendCanNeverFit) {
  ClusterState state = MakeState(TwoTeams(Quota(4), Quota(8, {}, 2)));  // b keeps 6 back
  const QueueId a = *state.FindQueue("a");
  const GpuTypeId h800 = *state.FindGpuType("H800");
  const QuotaTree& quota = state.quota_tree();
  EXPECT_FALSE(quota.NeverAdmits(a, h800, 6000));  // 4 own + 2 lent
  EXPECT_TRUE(quota.NeverAdmits(a, h800, 7000));
  EXPECT_FALSE(quota.Admit(a, h800, 7000).ok);
  Job big = GpuJob(1, 1, 7000);
  big.queue = a;
  Plan plan = RunCycle(state, {big}, 0);
  const Unplaced* u = FindUnplaced(plan, 1);
  ASSERT_NE(u, nullptr);
  EXPECT_EQ(u->reason.verdict, Verdict::kNever) << u->reason.Describe();
  EXPECT_EQ(u->reason.cause, Cause::kQuotaCohort);
  EXPECT_TRUE(engine::CanNeverRun(state, big));
}

}  // namespace
}  // namespace arbiter
