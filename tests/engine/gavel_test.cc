// Gavel's allocation and rounds (scheduler.ordering.policy gavel): the linear program, the
// allocation it gives on the throughput matrix, the priorities it realises it by, and the
// evictions at the end of a round.
#include "core/engine/gavel.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "arbiter/attained_service.h"
#include "arbiter/engine.h"
#include "core/engine/linear_program.h"
#include "core/engine/stages.h"
#include "sim/sim.h"
#include "sim/workload.h"
#include "testing/builders.h"

namespace arbiter {
namespace {

using testing::Add;
using testing::FindBind;
using testing::LabelledJob;
using testing::MakeState;
using testing::Nodes;

constexpr Millis kSecond = kMillisPerSecond;
constexpr Millis kMinute = 60 * kSecond;
constexpr Millis kHour = 60 * kMinute;

// Maximises `objective` under `rows` (each row's bound, then its coefficients).
std::vector<double> Solve(std::vector<double> objective,
                          const std::vector<std::pair<double, std::vector<double>>>& rows) {
  engine::LinearProgram lp(objective.size());
  lp.objective = std::move(objective);
  for (const auto& [bound, coefficients] : rows) lp.AddRow(bound) = coefficients;
  return engine::Maximize(lp);
}

TEST(LinearProgram, FindsTheOptimalVertex) {
  // max 3x + 2y, x + y <= 4, x + 3y <= 6: x = 4, y = 0.
  const std::vector<double> x = Solve({3, 2}, {{4, {1, 1}}, {6, {1, 3}}});
  EXPECT_NEAR(x[0], 4, 1e-9);
  EXPECT_NEAR(x[1], 0, 1e-9);
  // max x + y, x + 2y <= 4, 3x + y <= 6: the corner (1.6, 1.2).
  const std::vector<double> y = Solve({1, 1}, {{4, {1, 2}}, {6, {3, 1}}});
  EXPECT_NEAR(y[0], 1.6, 1e-9);
  EXPECT_NEAR(y[1], 1.2, 1e-9);
}

TEST(LinearProgram, SolvesADegenerateMaxMinProgram) {
  // max t, t - x <= 0, t - 2y <= 0, x + y <= 1 (bounds of 0: degenerate pivots): x = 2/3,
  // y = 1/3, t = 2/3.
  const std::vector<double> x =
      Solve({0, 0, 1}, {{0, {-1, 0, 1}}, {0, {0, -2, 1}}, {1, {1, 1, 0}}});
  EXPECT_NEAR(x[2], 2.0 / 3, 1e-9);
  EXPECT_NEAR(x[0], 2.0 / 3, 1e-9);
  EXPECT_NEAR(x[1], 1.0 / 3, 1e-9);
}

OrderingWeights Gavel(HeterogeneityPolicy objective) {
  OrderingWeights w;
  w.policy = OrderPolicy::kGavel;
  w.heterogeneity = objective;
  return w;
}

TEST(Gavel, TheAllocationSendsEachJobToTheModelItGainsMostOn) {
  const ClusterState state = MakeState(testing::V100AndK80());
  const GpuTypeId v100 = *state.FindGpuType("V100");
  const GpuTypeId k80 = *state.FindGpuType("K80");
  // The lstm jobs first in every other order (older).
  std::vector<Job> pending;
  for (JobId id = 1; id <= 4; ++id) pending.push_back(LabelledJob(id, 1, "lstm", 0));
  for (JobId id = 5; id <= 8; ++id) pending.push_back(LabelledJob(id, 1, "resnet", kMinute));
  for (HeterogeneityPolicy objective :
       {HeterogeneityPolicy::kMaxMinFairness, HeterogeneityPolicy::kMaxThroughput}) {
    const engine::GavelScope scope(state, pending, Gavel(objective));
    EXPECT_NEAR(scope.Share(pending[0], k80), 1.0, 1e-9);
    EXPECT_NEAR(scope.Share(pending[0], v100), 0.0, 1e-9);
    EXPECT_NEAR(scope.Share(pending[4], v100), 1.0, 1e-9);
    EXPECT_NEAR(scope.Share(pending[4], k80), 0.0, 1e-9);
    EXPECT_EQ(scope.BestOf(pending[4], kHour).type, v100);
    // The cycle places them so, the lstm jobs first.
    ClusterState s = MakeState(testing::V100AndK80());
    EngineOptions options;
    options.ordering = Gavel(objective);
    const Plan plan = testing::RunCycle(s, pending, kHour, options);
    ASSERT_EQ(plan.binds.size(), 8u);
    for (const Bind& b : plan.binds)
      EXPECT_EQ(b.allocation.gpu_type, b.job <= 4 ? k80 : v100) << "job " << b.job;
  }
  // The default order, the model chosen by placement alone, does not.
  ClusterState s = MakeState(testing::V100AndK80());
  const Plan plan = testing::RunCycle(s, pending, kHour, EngineOptions{});
  ASSERT_EQ(plan.binds.size(), 8u);
  int lstm_on_k80 = 0;
  for (const Bind& b : plan.binds) lstm_on_k80 += b.job <= 4 && b.allocation.gpu_type == k80;
  EXPECT_LT(lstm_on_k80, 4);
}

TEST(Gavel, MoreJobsThanGpusShareTheirTimeAlike) {
  const ClusterState state = MakeState(testing::V100AndK80());
  const GpuTypeId v100 = *state.FindGpuType("V100");
  const GpuTypeId k80 = *state.FindGpuType("K80");
  // Eight resnet jobs on eight GPUs, two running: max-min fairness gives each half its time on
  // each model (normalised throughput 0.5 x 4/3 + 0.5 x 2/3 = 1 each).
  std::vector<Job> pending;
  for (JobId id = 1; id <= 8; ++id) pending.push_back(LabelledJob(id, 1, "resnet", 0));
  const engine::GavelScope fair(state, pending, Gavel(HeterogeneityPolicy::kMaxMinFairness));
  for (const Job& job : pending) {
    EXPECT_NEAR(fair.Share(job, v100) * (2.0 / 1.5) + fair.Share(job, k80) * (1.0 / 1.5), 1.0, 1e-9)
        << "job " << job.id;
    EXPECT_NEAR(fair.Share(job, v100) + fair.Share(job, k80), 1.0, 1e-9);
  }
  // Sixteen jobs on eight GPUs: half their time each (one class: the same shares).
  for (JobId id = 9; id <= 16; ++id) pending.push_back(LabelledJob(id, 1, "resnet", 0));
  const engine::GavelScope crowded(state, pending, Gavel(HeterogeneityPolicy::kMaxMinFairness));
  EXPECT_NEAR(crowded.Share(pending[0], v100) + crowded.Share(pending[0], k80), 0.5, 1e-9);
  EXPECT_NEAR(crowded.Share(pending[15], v100), crowded.Share(pending[0], v100), 1e-12);
}

// One node of eight GPUs of one model: Gavel's rounds time-share it.
ClusterSpec OneNode() {
  ClusterSpec spec = testing::Cluster();
  Add(spec, Nodes("n", 1, "H800", 8));
  return spec;
}

TEST(Gavel, APriorityIsTheShareOverTheShareOfTimeHadThere) {
  const ClusterState state = MakeState(OneNode());
  // Two 8-GPU jobs on 8 GPUs: half the time each.
  std::vector<Job> pending = {LabelledJob(1, 8, "", 0), LabelledJob(2, 8, "", 0)};
  pending[0].time_on_model = {15 * kMinute};  // ran a quarter of the hour since its submission
  const engine::GavelScope scope(state, pending, Gavel(HeterogeneityPolicy::kMaxMinFairness));
  EXPECT_NEAR(scope.Share(pending[0], 0), 0.5, 1e-9);
  EXPECT_NEAR(scope.Pending(pending[0], kHour, 0), 0.5 / 0.25, 1e-9);
  // One that has not run there comes first, by its share.
  EXPECT_GT(scope.Pending(pending[1], kHour, 0), 1e6);
  EXPECT_EQ(
      engine::OrderPending(state, pending, kHour, Gavel(HeterogeneityPolicy::kMaxMinFairness)),
      (std::vector<std::uint32_t>{1, 0}));
  // AddTimeOnModel keeps the vector a driver passes back.
  std::vector<Millis> time;
  AddTimeOnModel(time, 2, 5 * kMinute);
  AddTimeOnModel(time, 2, kMinute);
  AddTimeOnModel(time, kNone, kHour);
  EXPECT_EQ(time, (std::vector<Millis>{0, 0, 6 * kMinute}));
}

TEST(Gavel, AWaitingJobEvictsOnePastItsRoundThatHadMoreOfItsShare) {
  // Job 1 runs the whole node since `start`, having run `before` on it earlier; job 2, submitted
  // with it at 0, waits, having run `waited_ran`.
  auto cycle = [](Millis now, Millis start, Millis before, Millis waited_ran,
                  const EngineOptions& options) {
    ClusterState state = MakeState(OneNode());
    Job running = LabelledJob(1, 8, "", 0);
    running.time_on_model = {before};
    testing::StartOn(state, running, "n-0", 0, start);
    Job waiting = LabelledJob(2, 8, "", 0);
    if (waited_ran > 0) waiting.time_on_model = {waited_ran};
    return testing::RunCycle(state, {waiting}, now, options);
  };
  EngineOptions options;
  options.ordering = Gavel(HeterogeneityPolicy::kMaxMinFairness);
  // At 10 minutes job 1 has had all its time there (priority 0.5), job 2 none: a round (6
  // minutes) is over, job 2 takes the node.
  const Plan plan = cycle(10 * kMinute, 0, 0, 0, options);
  ASSERT_EQ(plan.evictions.size(), 1u);
  EXPECT_EQ(plan.evictions[0].job, 1u);
  EXPECT_EQ(plan.evictions[0].kind, Eviction::Kind::kAllocationRound);
  EXPECT_STREQ(EvictionKindName(plan.evictions[0].kind), "allocation_round");
  ASSERT_NE(FindBind(plan, 2), nullptr);
  // Within the round nothing evicts it.
  EXPECT_TRUE(cycle(5 * kMinute, 0, 0, 0, options).evictions.empty());
  // Job 2 ran 0 to 30 minutes, job 1 from 30: at 40 minutes job 2 has had 3/4 of its time (0.67),
  // job 1 a quarter (2): it runs on.
  EXPECT_TRUE(cycle(40 * kMinute, 30 * kMinute, 0, 30 * kMinute, options).evictions.empty());
  // At 80 minutes job 1 has had 5/8 of its time (0.8), job 2 3/8 (1.33): job 2 takes it back.
  EXPECT_EQ(cycle(80 * kMinute, 30 * kMinute, 0, 30 * kMinute, options).evictions.size(), 1u);
  // A shorter round; no preemption.
  options.ordering.gavel_round = 4 * kMinute;
  EXPECT_EQ(cycle(5 * kMinute, 0, 0, 0, options).evictions.size(), 1u);
  options.preemption.enabled = false;
  EXPECT_TRUE(cycle(10 * kMinute, 0, 0, 0, options).evictions.empty());
}

TEST(Gavel, TheSimulatorTimeSharesTheCluster) {
  // Two jobs of two hours on the whole node, the second submitted a minute after the first. In
  // the default order the second starts when the first ends; under Gavel's rounds (30 minutes,
  // a checkpoint on the signal) they take turns, and both end by about four hours.
  ClusterSpec spec = OneNode();
  spec.priority_classes[0].grace_period = kMinute;
  sim::Workload workload;
  for (int i = 0; i < 2; ++i) {
    sim::SimJob j;
    j.job = LabelledJob(0, 8, "", i * kMinute);
    j.job.name = "job-" + std::to_string(i);
    j.job.checkpoint_interval = kHour;
    j.kind = sim::WorkKind::kTraining;
    j.workload = "train";
    j.work = 2 * kHour;
    j.checkpoint_cost = 10 * kSecond;
    workload.jobs.push_back(j);
  }
  EngineOptions options;
  options.ordering = Gavel(HeterogeneityPolicy::kMaxMinFairness);
  options.ordering.gavel_round = 30 * kMinute;
  Result<sim::RunResult> r = sim::Simulate(spec, options, workload, {}, "gavel");
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->jobs.size(), 2u);
  Millis second_start = -1;
  std::int32_t evictions = 0;
  for (const sim::JobRecord& j : r->jobs) {
    EXPECT_GT(j.end, 0) << j.name;
    EXPECT_LT(j.end, 5 * kHour) << j.name;
    evictions += j.evictions;
    if (j.name == "job-1") second_start = j.first_start;
  }
  EXPECT_GT(evictions, 2);
  EXPECT_GE(second_start, 30 * kMinute);
  EXPECT_LT(second_start, kHour);
}

}  // namespace
}  // namespace arbiter
