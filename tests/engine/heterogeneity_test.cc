// Heterogeneous GPUs after Gavel (gpu_throughput, scheduler.ordering.heterogeneity): the matrix
// read by a job's label, the checks of its rows, the choice of the fastest model, the service of
// max-min fairness in normalised throughput, and the simulator running a job at its model's speed.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "arbiter/attained_service.h"
#include "arbiter/engine.h"
#include "core/engine/stages.h"
#include "sim/sim.h"
#include "sim/workload.h"
#include "testing/builders.h"

namespace arbiter {
namespace {

using testing::Add;
using testing::FindBind;
using testing::GpuJob;
using testing::MakeState;
using testing::Nodes;
using testing::RunCycle;

constexpr Millis kSecond = kMillisPerSecond;
constexpr Millis kMinute = 60 * kSecond;
constexpr Millis kHour = 60 * kMinute;

ClusterSpec Mixed() { return testing::V100AndK80(); }

// Submitted at its id (in milliseconds): the lower id is the older.
Job Labelled(JobId id, std::int64_t gpus, const std::string& model) {
  return testing::LabelledJob(id, gpus, model, static_cast<Millis>(id));
}

EngineOptions With(HeterogeneityPolicy h, OrderPolicy order = OrderPolicy::kMultifactor) {
  EngineOptions o;
  o.ordering.policy = order;
  o.ordering.heterogeneity = h;
  return o;
}

TEST(Heterogeneity, TheMatrixIsReadByTheJobsLabel) {
  const ClusterState state = MakeState(Mixed());
  const GpuTypeId v100 = *state.FindGpuType("V100");
  const GpuTypeId k80 = *state.FindGpuType("K80");
  ASSERT_TRUE(state.has_throughput());
  EXPECT_DOUBLE_EQ(state.Throughput(Labelled(1, 1, "resnet"), v100), 2.0);
  EXPECT_DOUBLE_EQ(state.Throughput(Labelled(1, 1, "resnet"), k80), 1.0);
  // With an equal share of the cluster (half V100, half K80) resnet does 1.5 a second.
  EXPECT_DOUBLE_EQ(state.NormalizedThroughput(Labelled(1, 1, "resnet"), v100), 2.0 / 1.5);
  EXPECT_DOUBLE_EQ(state.NormalizedThroughput(Labelled(1, 1, "resnet"), k80), 1.0 / 1.5);
  // No label, or a workload without a row: alike everywhere.
  EXPECT_DOUBLE_EQ(state.Throughput(Labelled(1, 1, ""), v100), 1.0);
  EXPECT_DOUBLE_EQ(state.Throughput(Labelled(1, 1, "bert"), k80), 1.0);
  EXPECT_DOUBLE_EQ(state.NormalizedThroughput(Labelled(1, 1, "bert"), k80), 1.0);
  // The label is configurable.
  ClusterSpec spec = Mixed();
  spec.throughput.label = "arch";
  const ClusterState other = MakeState(spec);
  Job job = Labelled(1, 1, "");
  job.labels["arch"] = "lstm";
  EXPECT_DOUBLE_EQ(other.Throughput(job, k80), 3.0);
  EXPECT_DOUBLE_EQ(other.Throughput(Labelled(1, 1, "lstm"), k80), 1.0);
}

TEST(Heterogeneity, EveryRowCoversEveryModelOfTheClusterWithAPositiveValue) {
  ClusterSpec spec = Mixed();
  spec.throughput.rows[0].by_model.erase("K80");
  Result<ClusterState> missing = ClusterState::Create(spec);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().field(), "gpu_throughput.workloads.resnet");
  EXPECT_NE(missing.status().message().find("K80"), std::string::npos);

  spec = Mixed();
  spec.throughput.rows[1].by_model["V100"] = 0;
  Result<ClusterState> zero = ClusterState::Create(spec);
  ASSERT_FALSE(zero.ok());
  EXPECT_EQ(zero.status().field(), "gpu_throughput.workloads.lstm.V100");

  spec = Mixed();
  spec.throughput.rows.push_back(spec.throughput.rows[0]);
  Result<ClusterState> repeated = ClusterState::Create(spec);
  ASSERT_FALSE(repeated.ok());
  EXPECT_NE(repeated.status().message().find("repeated"), std::string::npos);

  // A model the cluster lacks is no error: one matrix serves several clusters.
  spec = Mixed();
  spec.throughput.rows[0].by_model["A100"] = 5;
  EXPECT_TRUE(ClusterState::Create(spec).ok());
}

TEST(Heterogeneity, MaxThroughputTakesTheFastestModelTheJobFitsOn) {
  for (const char* model : {"resnet", "lstm"}) {
    SCOPED_TRACE(model);
    ClusterState state = MakeState(Mixed());
    const GpuTypeId fastest = *state.FindGpuType(std::string(model) == "resnet" ? "V100" : "K80");
    Plan plan =
        RunCycle(state, {Labelled(1, 4, model)}, 0, With(HeterogeneityPolicy::kMaxThroughput));
    ASSERT_NE(FindBind(plan, 1), nullptr);
    EXPECT_EQ(FindBind(plan, 1)->allocation.gpu_type, fastest);
    // The fastest model is full: the next takes the other rather than wait.
    plan = RunCycle(state, {Labelled(2, 4, model)}, 1, With(HeterogeneityPolicy::kMaxThroughput));
    ASSERT_NE(FindBind(plan, 2), nullptr);
    EXPECT_NE(FindBind(plan, 2)->allocation.gpu_type, fastest);
  }
  // Without a policy the placement alone chooses, the same for both workloads.
  ClusterState a = MakeState(Mixed());
  ClusterState b = MakeState(Mixed());
  const Plan resnet = RunCycle(a, {Labelled(1, 4, "resnet")});
  const Plan lstm = RunCycle(b, {Labelled(1, 4, "lstm")});
  ASSERT_FALSE(resnet.binds.empty());
  ASSERT_FALSE(lstm.binds.empty());
  EXPECT_EQ(resnet.binds[0].allocation.gpu_type, lstm.binds[0].allocation.gpu_type);
}

TEST(Heterogeneity, AJobDeferredToTheSecondPassHoldsItsStrictFifoQueueUntilTheNextCycle) {
  // Four V100s, all busy, and eight K80s. The resnet job is given the V100s (its comparative
  // advantage), finds them full and waits for the second pass, where it takes four K80s. The lstm
  // job behind it fits on a K80 at once; in a strict-FIFO queue it does not start ahead of the
  // resnet job, and starts at the next cycle; in a best-effort queue it starts in the first pass.
  for (const bool strict : {true, false}) {
    SCOPED_TRACE(strict ? "strict FIFO" : "best effort");
    ClusterSpec spec = Mixed();
    spec.nodes.clear();
    Add(spec, Nodes("v", 1, "V100", 4));
    Add(spec, Nodes("k", 1, "K80", 8));
    spec.queues[0].strict_fifo = strict;
    ClusterState state = MakeState(spec);
    const EngineOptions options = With(HeterogeneityPolicy::kMaxThroughput);
    const Plan busy = RunCycle(state, {Labelled(1, 4, "resnet")}, 0, options);
    ASSERT_NE(FindBind(busy, 1), nullptr);
    ASSERT_EQ(busy.binds[0].allocation.gpu_type, *state.FindGpuType("V100"));

    const std::vector<Job> pending = {Labelled(2, 4, "resnet"), Labelled(3, 1, "lstm")};
    const Plan first = RunCycle(state, pending, 10, options);
    ASSERT_NE(FindBind(first, 2), nullptr);
    EXPECT_EQ(FindBind(first, 2)->allocation.gpu_type, *state.FindGpuType("K80"));
    if (strict) {
      EXPECT_EQ(FindBind(first, 3), nullptr);
      ASSERT_EQ(first.unplaced.size(), 1u);
      EXPECT_EQ(first.unplaced[0].reason.cause, Cause::kQueueOrder);
      const Plan next = RunCycle(state, {pending[1]}, 20, options);
      ASSERT_NE(FindBind(next, 3), nullptr);
      EXPECT_EQ(FindBind(next, 3)->allocation.gpu_type, *state.FindGpuType("K80"));
    } else {
      ASSERT_NE(FindBind(first, 3), nullptr);
    }
  }
}

// Two V100s and two K80s; resnet gains more from a V100 (2x a K80) than a3c (1.3x).
ClusterSpec TwoAndTwo() {
  ClusterSpec spec = testing::Cluster();
  Add(spec, Nodes("v", 1, "V100", 2));
  Add(spec, Nodes("k", 1, "K80", 2));
  spec.throughput.rows = {{"resnet", {{"V100", 2.0}, {"K80", 1.0}}},
                          {"a3c", {{"V100", 1.3}, {"K80", 1.0}}}};
  return spec;
}

TEST(Heterogeneity, TheModelsGoToTheJobsThatGainMostFromThem) {
  // The a3c jobs come first in the order; each would run fastest on a V100. By comparative
  // advantage the V100s go to resnet, which gains more from them, and a3c takes the K80s.
  ClusterState state = MakeState(TwoAndTwo());
  const std::vector<Job> jobs = {Labelled(1, 1, "a3c"), Labelled(2, 1, "a3c"),
                                 Labelled(3, 1, "resnet"), Labelled(4, 1, "resnet")};
  const std::vector<std::uint32_t> order = {0, 1, 2, 3};
  const GpuTypeId v100 = *state.FindGpuType("V100");
  const GpuTypeId k80 = *state.FindGpuType("K80");
  EXPECT_EQ(engine::PreferredModels(state, jobs, order),
            (std::vector<GpuTypeId>{k80, k80, v100, v100}));
  for (HeterogeneityPolicy h :
       {HeterogeneityPolicy::kMaxThroughput, HeterogeneityPolicy::kMaxMinFairness}) {
    ClusterState fresh = MakeState(TwoAndTwo());
    const Plan plan = RunCycle(fresh, jobs, 10, With(h, OrderPolicy::kLas));
    ASSERT_EQ(plan.binds.size(), 4u);
    for (const Bind& b : plan.binds) {
      EXPECT_EQ(b.allocation.gpu_type, b.job <= 2 ? k80 : v100) << "job " << b.job;
    }
  }
  // More jobs than GPUs: the later ones get no model, a job without a row none either.
  std::vector<Job> more = jobs;
  more.push_back(Labelled(5, 1, "resnet"));
  more.push_back(Labelled(6, 1, ""));
  EXPECT_EQ(engine::PreferredModels(state, more, std::vector<std::uint32_t>{0, 1, 2, 3, 4, 5}),
            (std::vector<GpuTypeId>{k80, k80, v100, v100, engine::kNoModelLeft, kNone}));
}

TEST(Heterogeneity, AJobWhoseModelIsFullTakesAnotherThatNoOneElseWants) {
  // Both V100s busy: the resnet jobs, whose model is the V100, take the free K80s rather than
  // leave them idle (the second pass of the cycle).
  ClusterState state = MakeState(TwoAndTwo());
  testing::StartOn(state, GpuJob(9, 1, 2 * kMilliPerGpu), "v-0", 0);
  const Plan plan = RunCycle(state, {Labelled(1, 1, "resnet"), Labelled(2, 1, "resnet")}, 10,
                             With(HeterogeneityPolicy::kMaxThroughput));
  ASSERT_EQ(plan.binds.size(), 2u);
  for (const Bind& b : plan.binds) EXPECT_EQ(b.allocation.gpu_type, *state.FindGpuType("K80"));
}

TEST(Heterogeneity, MaxMinFairnessCountsServiceInNormalisedThroughput) {
  ClusterState state = MakeState(Mixed());
  const GpuTypeId v100 = *state.FindGpuType("V100");
  const GpuTypeId k80 = *state.FindGpuType("K80");
  OrderingWeights w;
  w.policy = OrderPolicy::kLas;
  w.las_thresholds = {kHour};
  const Job resnet = Labelled(1, 1, "resnet");
  // Without max-min fairness an hour run is an hour of service, on any model.
  EXPECT_EQ(ServiceOfRun(state, resnet, k80, kHour, w), kHour);
  w.heterogeneity = HeterogeneityPolicy::kMaxThroughput;
  EXPECT_EQ(ServiceOfRun(state, resnet, v100, kHour, w), kHour);
  // With it: an hour on a V100 is 4/3 of an hour at an equal share, on a K80 2/3.
  w.heterogeneity = HeterogeneityPolicy::kMaxMinFairness;
  EXPECT_EQ(ServiceOfRun(state, resnet, v100, kHour, w), 80 * kMinute);
  EXPECT_EQ(ServiceOfRun(state, resnet, k80, kHour, w), 40 * kMinute);
  EXPECT_EQ(ServiceOfRun(state, Labelled(2, 1, "bert"), k80, kHour, w), kHour);

  // Running jobs: after 50 minutes, the one on a V100 has passed the 1-hour threshold, the one on
  // a K80 has not.
  testing::StartOn(state, Labelled(1, 1, "resnet"), "v-0", 0, 0);
  Job on_k80 = Labelled(2, 1, "resnet");
  Allocation a;
  a.gpu_type = k80;
  TaskAllocation t;
  t.node = *state.FindNode("k-0");
  t.cpu = on_k80.groups[0].request.cpu;
  t.memory = on_k80.groups[0].request.memory;
  t.devices.push_back({0, kWholeGpu, state.node(t.node).devices[0].memory});
  a.tasks.push_back(t);
  ASSERT_TRUE(state.Bind(on_k80, a, 0).ok());
  EXPECT_EQ(RunningLasQueue(state, *state.FindRunning(1), 50 * kMinute, w), 1);
  EXPECT_EQ(RunningLasQueue(state, *state.FindRunning(2), 50 * kMinute, w), 0);
  EXPECT_EQ(RunningLasQueue(state, *state.FindRunning(2), 91 * kMinute, w), 1);
}

TEST(Heterogeneity, MaxMinFairnessPromisesTheCycleUntilAServiceThresholdAtItsRate) {
  // Two 1-GPU resnet jobs run, one on the V100, one on the K80; a job waits. Under LAS with
  // preemption the plan holds until a running job's service reaches the 1-hour threshold (it may
  // then be evicted): 45 minutes of run on the V100 (at 4/3), where time alone would say 60.
  ClusterSpec spec = testing::Cluster();
  Add(spec, Nodes("v", 1, "V100", 1));
  Add(spec, Nodes("k", 1, "K80", 1));
  spec.throughput.rows = {{"resnet", {{"V100", 2.0}, {"K80", 1.0}}}};
  ClusterState state = MakeState(spec);
  EngineOptions o = With(HeterogeneityPolicy::kMaxMinFairness, OrderPolicy::kLas);
  o.ordering.las_thresholds = {kHour};
  o.preemption.enabled = true;
  const Plan first = RunCycle(state, {Labelled(1, 1, "resnet")}, 0, o);
  ASSERT_EQ(first.binds.size(), 1u);
  EXPECT_EQ(first.binds[0].allocation.gpu_type, *state.FindGpuType("V100"));
  const Plan second = RunCycle(state, {Labelled(2, 1, "resnet")}, 0, o);
  ASSERT_EQ(second.binds.size(), 1u);
  Engine engine(o);
  const std::vector<Job> waiting = {Labelled(3, 1, "bert")};
  const Plan plan = engine.Schedule(state, waiting, 10 * kMinute);
  EXPECT_TRUE(plan.binds.empty());
  EXPECT_TRUE(plan.evictions.empty());
  // (Rounded service is taken a millisecond early.)
  EXPECT_EQ(plan.stable_until, 45 * kMinute - 1);
}

TEST(Heterogeneity, TheSimulatorRunsAJobAtItsModelsSpeed) {
  ClusterSpec spec = testing::Cluster();
  Add(spec, Nodes("k", 1, "K80", 2));
  spec.throughput.rows = {{"slow", {{"K80", 0.5}}}, {"fast", {{"K80", 4.0}}}};
  sim::Workload workload;
  auto add = [&](const std::string& name, const std::string& model) {
    sim::SimJob j;
    j.job = Labelled(0, 1, model);
    j.job.name = name;
    j.kind = sim::WorkKind::kBatch;
    j.workload = name;
    j.work = kHour;
    workload.jobs.push_back(j);
  };
  add("slow", "slow");
  add("fast", "fast");
  add("plain", "");
  Result<sim::RunResult> r = sim::Simulate(spec, EngineOptions{}, workload, {}, "test");
  ASSERT_TRUE(r.ok()) << r.status().message();
  auto end = [&](const std::string& name) {
    for (const sim::JobRecord& j : r->jobs) {
      if (j.name == name) return j.end - j.first_start;
    }
    return Millis{-1};
  };
  EXPECT_EQ(end("slow"), 2 * kHour);
  EXPECT_EQ(end("fast"), 15 * kMinute);
  EXPECT_EQ(end("plain"), kHour);
}

TEST(Heterogeneity, CheckpointsComeEveryIntervalOfRunTimeAtAnySpeed) {
  // Half speed, a checkpoint every 10 minutes of run time (costing 1 minute): an hour of work
  // takes 120 minutes of run, and 11 checkpoints before its end.
  ClusterSpec spec = testing::Cluster();
  Add(spec, Nodes("k", 1, "K80", 1));
  spec.throughput.rows = {{"slow", {{"K80", 0.5}}}};
  sim::Workload workload;
  sim::SimJob j;
  j.job = Labelled(0, 1, "slow");
  j.job.name = "train";
  j.job.checkpoint_interval = 10 * kMinute;
  j.kind = sim::WorkKind::kTraining;
  j.checkpoint_cost = kMinute;
  j.workload = "train";
  j.work = kHour;
  workload.jobs.push_back(j);
  Result<sim::RunResult> alone = sim::Simulate(spec, EngineOptions{}, workload, {}, "test");
  ASSERT_TRUE(alone.ok()) << alone.status().message();
  ASSERT_EQ(alone->jobs.size(), 1u);
  EXPECT_EQ(alone->jobs[0].end, 131 * kMinute);
}

}  // namespace
}  // namespace arbiter
