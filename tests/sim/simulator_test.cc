// The simulator end to end on small clusters: exact start and end times, checkpoints, evictions,
// node outages, inference services, termination and the metrics of queues.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "sim/latency.h"
#include "sim/sim.h"
#include "sim/workload.h"
#include "testing/builders.h"

namespace arbiter::sim {
namespace {

using testing::Add;
using testing::Cluster;
using testing::Nodes;

constexpr Millis kSecond = kMillisPerSecond;
constexpr Millis kMinute = 60 * kSecond;
constexpr Millis kHour = 60 * kMinute;
constexpr PriorityClassId kP0 = 0, kP1 = 1;

double Hours(Millis t) { return static_cast<double>(t) / static_cast<double>(kHour); }
double Seconds(Millis t) { return static_cast<double>(t) / static_cast<double>(kSecond); }

// One task of `gpus` whole GPUs in the first queue.
SimJob MakeJob(const std::string& name, WorkKind kind, std::int64_t gpus, Millis submit,
               Millis work, PriorityClassId cls = kP1) {
  SimJob j;
  j.job = testing::GpuJob(0, 1, gpus * kMilliPerGpu);
  j.job.name = name;
  j.job.priority_class = cls;
  j.job.submit_time = submit;
  j.kind = kind;
  j.workload = name;
  j.work = work;
  return j;
}

SimJob Training(const std::string& name, std::int64_t gpus, Millis submit, Millis work,
                Millis interval, Millis cost, Millis restart, PriorityClassId cls = kP1) {
  SimJob j = MakeJob(name, WorkKind::kTraining, gpus, submit, work, cls);
  j.job.checkpoint_interval = interval;
  j.job.restart_overhead = restart;
  j.checkpoint_cost = cost;
  return j;
}

RunResult RunSim(const ClusterSpec& spec, const Workload& workload, const SimOptions& options = {},
                 const EngineOptions& engine = {}) {
  Result<RunResult> r = Simulate(spec, engine, workload, options, "test");
  EXPECT_TRUE(r.ok()) << r.status().message();
  if (!r.ok()) return RunResult{};
  return std::move(r).value();
}

const JobRecord& Record(const RunResult& r, const std::string& name) {
  for (const JobRecord& j : r.jobs) {
    if (j.name == name) return j;
  }
  ADD_FAILURE() << "no job " << name;
  static const JobRecord kNone;
  return kNone;
}

const Sample* SampleAt(const RunResult& r, Millis t) {
  for (const Sample& s : r.series) {
    if (s.t == t) return &s;
  }
  ADD_FAILURE() << "no sample at " << t;
  return nullptr;
}

ClusterSpec OneNode(int gpus) {
  ClusterSpec spec = Cluster();
  Add(spec, Nodes("n", 1, "H800", gpus));
  return spec;
}

// ---------------------------------------------------------------------------------------------
// One job alone.

TEST(SimSingleJob, BatchJobRunsFromSubmitForItsWork) {
  const Millis submit = 10 * kMinute;
  const Millis work = 3 * kHour;
  Workload w;
  w.jobs.push_back(MakeJob("b", WorkKind::kBatch, 4, submit, work));
  const RunResult r = RunSim(OneNode(8), w);
  ASSERT_EQ(r.jobs.size(), 1u);
  const JobRecord& j = r.jobs[0];
  EXPECT_EQ(j.id, 1u);
  EXPECT_EQ(j.gpus, 4);
  EXPECT_EQ(j.submit, submit);
  EXPECT_GE(j.first_start, submit);
  EXPECT_LE(j.first_start, submit + SimOptions{}.min_cycle_interval);
  EXPECT_EQ(j.first_start, submit);  // the first cycle runs at the arrival
  EXPECT_EQ(j.end, submit + work);
  EXPECT_EQ(j.evictions, 0);
  EXPECT_EQ(j.failures, 0);
  EXPECT_EQ(j.gpu_hours_lost, 0);

  const GroupMetrics& m = r.overall;
  EXPECT_EQ(m.jobs_submitted, 1);
  EXPECT_EQ(m.jobs_completed, 1);
  EXPECT_EQ(m.jobs_pending_at_end, 0);
  EXPECT_EQ(m.jobs_running_at_end, 0);
  EXPECT_EQ(m.jct.count, 1);
  EXPECT_DOUBLE_EQ(m.jct.mean, Seconds(work));
  EXPECT_DOUBLE_EQ(m.jct.p99, Seconds(work));
  EXPECT_EQ(m.wait.count, 1);
  EXPECT_EQ(m.wait.mean, 0);
  EXPECT_EQ(m.longest_wait_s, 0);
  EXPECT_DOUBLE_EQ(m.gpu_hours_allocated, 4 * Hours(work));
  EXPECT_DOUBLE_EQ(m.gpu_hours_useful, 4 * Hours(work));
  EXPECT_EQ(m.gpu_hours_lost, 0);
  EXPECT_EQ(m.training_completion.count, 0);  // not a training job

  // Without a horizon the run ends with the last completion.
  EXPECT_EQ(r.horizon, submit + work);
  EXPECT_EQ(r.total_gpus, 8);
  EXPECT_DOUBLE_EQ(r.gpu_allocation, 4 * Hours(work) / (8 * Hours(submit + work)));
  EXPECT_DOUBLE_EQ(r.gpu_utilization, r.gpu_allocation);
  ASSERT_EQ(r.queue_names, std::vector<std::string>{"default"});
  EXPECT_EQ(r.queues.at("default").jobs_completed, 1);
  EXPECT_EQ(r.classes.at("P1").jobs_completed, 1);
  EXPECT_EQ(r.workloads.at("b").jobs_completed, 1);
  // Samples every 5 minutes up to the end: 4 GPUs held while it runs.
  ASSERT_EQ(r.series.size(), static_cast<std::size_t>((submit + work) / (5 * kMinute)));
  EXPECT_EQ(r.series.back().t, submit + work);
  EXPECT_EQ(SampleAt(r, 5 * kMinute)->allocated_gpus, 0);
  EXPECT_DOUBLE_EQ(SampleAt(r, 1 * kHour)->allocated_gpus, 4);
  EXPECT_EQ(SampleAt(r, 1 * kHour)->running_jobs, 1);
  EXPECT_DOUBLE_EQ(SampleAt(r, 1 * kHour)->healthy_gpus, 8);
}

TEST(SimSingleJob, WaitsForTheMinimumCycleIntervalAfterACycle) {
  // The second job arrives half a second after the first one's cycle: it starts one second after
  // that cycle.
  Workload w;
  w.jobs.push_back(MakeJob("a", WorkKind::kBatch, 1, 0, kHour));
  w.jobs.push_back(MakeJob("b", WorkKind::kBatch, 1, 500, kHour));
  const RunResult r = RunSim(OneNode(8), w);
  EXPECT_EQ(Record(r, "a").first_start, 0);
  EXPECT_EQ(Record(r, "b").first_start, kSecond);
  EXPECT_EQ(Record(r, "b").end, kSecond + kHour);
  EXPECT_DOUBLE_EQ(r.overall.wait.max, 0.5);
}

TEST(SimOrder, ArrivalsComeAfterEndsOfTheirInstantAndInWorkloadOrder) {
  // The workload lists jobs out of time order. At 1 h, "a" ends before "c" and "b" arrive (ends of
  // runs come first within an instant), and the cycle of that instant sees all three waiting jobs:
  // "d" has waited longest; "c" and "b", equal in all else, go in the order the workload lists
  // them.
  Workload w;
  w.jobs.push_back(MakeJob("c", WorkKind::kBatch, 8, kHour, kHour));
  w.jobs.push_back(MakeJob("a", WorkKind::kBatch, 8, 0, kHour));
  w.jobs.push_back(MakeJob("b", WorkKind::kBatch, 8, kHour, kHour));
  w.jobs.push_back(MakeJob("d", WorkKind::kBatch, 8, kHour / 2, kHour));
  const RunResult r = RunSim(OneNode(8), w);
  EXPECT_EQ(Record(r, "c").id, 1u);
  EXPECT_EQ(Record(r, "a").first_start, 0);
  EXPECT_EQ(Record(r, "d").first_start, kHour);
  EXPECT_EQ(Record(r, "c").first_start, 2 * kHour);
  EXPECT_EQ(Record(r, "b").first_start, 3 * kHour);
  EXPECT_EQ(r.horizon, 4 * kHour);
  // Records follow the workload's order, whatever the order of the arrivals.
  ASSERT_EQ(r.jobs.size(), 4u);
  EXPECT_EQ(r.jobs[0].name, "c");
  EXPECT_EQ(r.jobs[3].name, "d");
}

TEST(SimInspect, StopsAtTheMomentWithLaterArrivalsStillToCome) {
  Workload w;
  w.jobs.push_back(MakeJob("late", WorkKind::kBatch, 8, 2 * kHour, kHour));
  w.jobs.push_back(MakeJob("a", WorkKind::kBatch, 8, 0, kHour));
  w.jobs.push_back(MakeJob("b", WorkKind::kBatch, 8, 10 * kMinute, kHour));
  const ClusterSpec spec = OneNode(8);
  auto inspect = [&](const std::string& job, Millis at) {
    Result<JobStatusAt> r = Inspect(spec, EngineOptions{}, w, SimOptions{}, job, at);
    EXPECT_TRUE(r.ok()) << r.status().message();
    return r.ok() ? *r : JobStatusAt{};
  };
  const JobStatusAt waiting = inspect("b", 30 * kMinute);
  EXPECT_EQ(waiting.state, JobStatusAt::State::kPending);
  EXPECT_EQ(waiting.since, 10 * kMinute);
  ASSERT_TRUE(waiting.reason.has_value());
  EXPECT_EQ(waiting.reason->cause, Cause::kInsufficientGpu);
  EXPECT_FALSE(waiting.placed);
  // The run's own cycle at 30 min (one every 30 s from b's arrival at 10 min) gives the reason.
  EXPECT_EQ(waiting.cycle_at, 30 * kMinute);
  EXPECT_EQ(inspect("b", 30 * kMinute + 1).cycle_at, 30 * kMinute + 30 * kSecond);
  const JobStatusAt late = inspect("late", 30 * kMinute);
  EXPECT_EQ(late.state, JobStatusAt::State::kNotSubmitted);
  EXPECT_EQ(late.until, 2 * kHour);
  // The events at the moment are included: "a" ends at 1 h and the cycle then starts "b".
  const JobStatusAt started = inspect("b", kHour);
  EXPECT_EQ(started.state, JobStatusAt::State::kRunning);
  EXPECT_EQ(started.since, kHour);
  EXPECT_EQ(started.until, 2 * kHour);
  EXPECT_EQ(inspect("a", kHour).state, JobStatusAt::State::kCompleted);
}

// The per-cycle eviction cap makes the second preemptor wait for the next cycle: Inspect says
// so at the cycle's own time, and names the next cycle (its time, its victim, its start) just
// after it, as the run does.
TEST(SimInspect, ReportsTheRunsOwnCycleWithItsEvictionBudget) {
  ClusterSpec spec = OneNode(8);
  spec.priority_classes[kP1].grace_period = 10 * kSecond;
  EngineOptions engine;
  engine.preemption.max_gpus_per_cycle = 4 * kMilliPerGpu;
  Workload w;
  w.jobs.push_back(MakeJob("low-a", WorkKind::kBatch, 4, 0, 10 * kHour));
  w.jobs.push_back(MakeJob("low-b", WorkKind::kBatch, 4, 0, 10 * kHour));
  w.jobs.push_back(MakeJob("high-a", WorkKind::kBatch, 4, kHour, kHour, kP0));
  w.jobs.push_back(MakeJob("high-b", WorkKind::kBatch, 4, kHour, kHour, kP0));
  SimOptions options;
  options.check_invariants = true;
  options.horizon = 3 * kHour;
  auto inspect = [&](const std::string& job, Millis at) {
    Result<JobStatusAt> r = Inspect(spec, engine, w, options, job, at);
    EXPECT_TRUE(r.ok()) << r.status().message();
    return r.ok() ? *r : JobStatusAt{};
  };
  // The cycle at 1 h evicts one of the low jobs for high-a and has no budget left for high-b.
  const JobStatusAt capped = inspect("high-b", kHour);
  EXPECT_EQ(capped.state, JobStatusAt::State::kPending);
  EXPECT_EQ(capped.cycle_at, kHour);
  EXPECT_FALSE(capped.placed);
  EXPECT_TRUE(capped.reason.has_value());
  const JobStatusAt a = inspect("high-a", kHour);
  EXPECT_EQ(a.state, JobStatusAt::State::kStarting);
  ASSERT_EQ(a.victims.size(), 1u);
  const std::string other = a.victims[0] == "low-a" ? "low-b" : "low-a";
  // Just after 1 h: the next cycle runs when that victim stops and is pending again (1h00m10s),
  // evicts the other low job, and high-b starts 10 s later.
  const JobStatusAt next = inspect("high-b", kHour + 1);
  EXPECT_EQ(next.state, JobStatusAt::State::kPending);
  EXPECT_EQ(next.cycle_at, kHour + 10 * kSecond);
  EXPECT_TRUE(next.placed);
  EXPECT_EQ(next.victims, std::vector<std::string>{other});
  EXPECT_EQ(next.until, kHour + 20 * kSecond);
  EXPECT_EQ(next.nodes.size(), 1u);
  // The run agrees.
  const RunResult run = RunSim(spec, w, options, engine);
  EXPECT_EQ(Record(run, "high-a").first_start, kHour + 10 * kSecond);
  EXPECT_EQ(Record(run, "high-b").first_start, kHour + 20 * kSecond);
}

// No cycle after the moment before the horizon: Inspect says so rather than making one up.
TEST(SimInspect, NoCycleBeforeTheHorizon) {
  Workload w;
  w.jobs.push_back(MakeJob("a", WorkKind::kBatch, 8, 0, 10 * kHour));
  w.jobs.push_back(MakeJob("b", WorkKind::kBatch, 8, kHour, kHour));
  SimOptions options;
  options.check_invariants = true;
  options.horizon = kHour + 10 * kSecond;
  Result<JobStatusAt> r = Inspect(OneNode(8), EngineOptions{}, w, options, "b", kHour + kSecond);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->state, JobStatusAt::State::kPending);
  EXPECT_EQ(r->cycle_at, -1);
  EXPECT_FALSE(r->placed);
  EXPECT_FALSE(r->reason.has_value());
  // Past the horizon: refused.
  EXPECT_FALSE(Inspect(OneNode(8), EngineOptions{}, w, options, "b", 2 * kHour).ok());
}

void ExpectSameMetrics(const GroupMetrics& a, const GroupMetrics& b) {
  EXPECT_EQ(a.jobs_submitted, b.jobs_submitted);
  EXPECT_EQ(a.jobs_completed, b.jobs_completed);
  EXPECT_EQ(a.jobs_pending_at_end, b.jobs_pending_at_end);
  EXPECT_EQ(a.jobs_running_at_end, b.jobs_running_at_end);
  EXPECT_EQ(a.jct.mean, b.jct.mean);
  EXPECT_EQ(a.jct.p99, b.jct.p99);
  EXPECT_EQ(a.wait.mean, b.wait.mean);
  EXPECT_EQ(a.wait.max, b.wait.max);
  EXPECT_EQ(a.longest_wait_s, b.longest_wait_s);
  EXPECT_EQ(a.evictions, b.evictions);
  EXPECT_EQ(a.failures, b.failures);
  EXPECT_EQ(a.gpu_hours_lost, b.gpu_hours_lost);
  EXPECT_EQ(a.gpu_hours_allocated, b.gpu_hours_allocated);
  EXPECT_EQ(a.gpu_hours_useful, b.gpu_hours_useful);
}

TEST(SimDeterminism, TwoRunsGiveTheSameJobsAndMetrics) {
  // A busy mix: generated training and batch jobs, high-priority jobs that evict, an outage.
  ClusterSpec spec = Cluster();
  Add(spec, Nodes("n", 2, "H800", 8));
  Generator train;
  train.name = "train";
  train.kind = WorkKind::kTraining;
  train.job = testing::GpuJob(0, 1, 1000);
  train.job.checkpoint_interval = 30 * kMinute;
  train.job.restart_overhead = 2 * kMinute;
  train.arrivals.per_hour = 6;
  train.arrivals.count = 30;
  train.work = Dist{Dist::Kind::kExponential, static_cast<double>(2 * kHour), 0, {}, {}};
  train.gpus = Dist{Dist::Kind::kChoice, 0, 0, {1, 2, 4, 8}, {}};
  train.gpus_set = true;
  train.checkpoint_cost = kMinute;
  Generator urgent = train;
  urgent.name = "urgent";
  urgent.kind = WorkKind::kBatch;
  urgent.job.priority_class = kP0;
  urgent.arrivals.per_hour = 1;
  urgent.arrivals.count = 5;
  Workload w;
  w.jobs = Generate(train, 7, 0);
  for (SimJob& j : Generate(urgent, 7, 0)) w.jobs.push_back(std::move(j));
  w.outages.push_back({1, 3 * kHour, kHour});
  const RunResult a = RunSim(spec, w);
  const RunResult b = RunSim(spec, w);
  EXPECT_EQ(a.overall.jobs_completed, 35);
  EXPECT_GT(a.overall.evictions + a.overall.failures, 0);
  EXPECT_EQ(a.horizon, b.horizon);
  EXPECT_EQ(a.events, b.events);
  EXPECT_EQ(a.cycles, b.cycles);
  ASSERT_EQ(a.jobs.size(), b.jobs.size());
  for (std::size_t i = 0; i < a.jobs.size(); ++i) {
    const JobRecord& x = a.jobs[i];
    const JobRecord& y = b.jobs[i];
    EXPECT_EQ(x.id, y.id);
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.submit, y.submit);
    EXPECT_EQ(x.first_start, y.first_start);
    EXPECT_EQ(x.end, y.end);
    EXPECT_EQ(x.evictions, y.evictions);
    EXPECT_EQ(x.failures, y.failures);
    EXPECT_EQ(x.gpu_hours_lost, y.gpu_hours_lost);
  }
  ExpectSameMetrics(a.overall, b.overall);
  for (const auto& [name, m] : a.classes) ExpectSameMetrics(m, b.classes.at(name));
  ASSERT_EQ(a.series.size(), b.series.size());
  for (std::size_t i = 0; i < a.series.size(); ++i) {
    EXPECT_EQ(a.series[i].allocated_gpus, b.series[i].allocated_gpus);
    EXPECT_EQ(a.series[i].pending_jobs, b.series[i].pending_jobs);
  }
}

// ---------------------------------------------------------------------------------------------
// Training progress, checkpoints and evictions.

TEST(SimTraining, CheckpointsAddTheirCostBetweenIntervals) {
  Workload w;
  w.jobs.push_back(Training("t", 8, 0, 10 * kHour, kHour, kMinute, 5 * kMinute));
  // Not a multiple of the interval: a tenth checkpoint at 10h of progress.
  w.jobs.push_back(Training("u", 8, 0, 10 * kHour + 30 * kMinute, kHour, kMinute, 0));
  ClusterSpec spec = Cluster();
  Add(spec, Nodes("n", 2, "H800", 8));
  const RunResult r = RunSim(spec, w);
  // No checkpoint after the last interval: 9 of them, and no restart overhead on a first start.
  EXPECT_EQ(Record(r, "t").end, 10 * kHour + 9 * kMinute);
  EXPECT_EQ(Record(r, "u").end, 10 * kHour + 30 * kMinute + 10 * kMinute);
  EXPECT_EQ(r.overall.gpu_hours_lost, 0);
  EXPECT_EQ(r.overall.training_completion.count, 2);
  EXPECT_DOUBLE_EQ(r.overall.training_completion.max, Seconds(10 * kHour + 40 * kMinute));
}

// A P1 training job on the whole node (10h of work, a checkpoint every hour that takes a minute,
// 5 minutes to restart) and a P0 batch job of an hour on the whole node at 2h32m, when the victim
// has made 2h30m of progress and saved 2h.
RunResult EvictTraining(Millis grace) {
  ClusterSpec spec = OneNode(8);
  spec.priority_classes[kP1].grace_period = grace;
  Workload w;
  w.jobs.push_back(Training("victim", 8, 0, 10 * kHour, kHour, kMinute, 5 * kMinute));
  w.jobs.push_back(MakeJob("urgent", WorkKind::kBatch, 8, 2 * kHour + 32 * kMinute, kHour, kP0));
  return RunSim(spec, w);
}

TEST(SimEviction, WithoutGraceTheVictimLosesWorkSinceItsCheckpoint) {
  const RunResult r = EvictTraining(0);
  const JobRecord& victim = Record(r, "victim");
  const JobRecord& urgent = Record(r, "urgent");
  const Millis evicted = 2 * kHour + 32 * kMinute;
  EXPECT_EQ(urgent.first_start, evicted);
  EXPECT_EQ(urgent.end, evicted + kHour);
  EXPECT_EQ(victim.evictions, 1);
  EXPECT_EQ(victim.failures, 0);
  EXPECT_EQ(victim.first_start, 0);
  // 30 minutes since the checkpoint at 2h, and the 5 minute restart.
  EXPECT_NEAR(victim.gpu_hours_lost, 8 * (0.5 + 5.0 / 60), 1e-12);
  // It restarts when the urgent job ends, from 2h of progress: 5 minutes of restart, 8h of work
  // and 7 checkpoints. That is the undisturbed end (10h9m) plus the hour it waited, the 30
  // minutes lost and the restart.
  const Millis restart = evicted + kHour;
  EXPECT_EQ(victim.end, restart + 5 * kMinute + 8 * kHour + 7 * kMinute);
  EXPECT_EQ(victim.end, 10 * kHour + 9 * kMinute + kHour + 30 * kMinute + 5 * kMinute);
  EXPECT_EQ(r.overall.evictions, 1);
  EXPECT_EQ(r.overall.failures, 0);
  EXPECT_NEAR(r.overall.gpu_hours_lost, victim.gpu_hours_lost, 1e-12);
  // Allocated: the victim before the eviction and after its restart, and the urgent job.
  const double victim_hours = Hours(evicted) + Hours(victim.end - restart);
  EXPECT_NEAR(r.classes.at("P1").gpu_hours_allocated, 8 * victim_hours, 1e-9);
  EXPECT_NEAR(r.classes.at("P1").gpu_hours_useful, 8 * (victim_hours - 35.0 / 60), 1e-9);
  EXPECT_NEAR(r.classes.at("P0").gpu_hours_allocated, 8.0, 1e-9);
}

TEST(SimEviction, AGraceLongEnoughToCheckpointLosesOnlyTheRestart) {
  const Millis grace = 2 * kMinute;  // >= the checkpoint's minute
  const RunResult r = EvictTraining(grace);
  const JobRecord& victim = Record(r, "victim");
  const JobRecord& urgent = Record(r, "urgent");
  const Millis signal = 2 * kHour + 32 * kMinute;
  // The urgent job holds the devices from the signal and starts when the victim stops.
  EXPECT_EQ(urgent.first_start, signal + grace);
  EXPECT_EQ(urgent.end, signal + grace + kHour);
  EXPECT_EQ(victim.evictions, 1);
  EXPECT_NEAR(victim.gpu_hours_lost, 8 * 5.0 / 60, 1e-12);
  // It saved 2h30m on the signal: 7h30m of work and 7 checkpoints left after the restart.
  const Millis restart = urgent.end;
  EXPECT_EQ(victim.end, restart + 5 * kMinute + 7 * kHour + 30 * kMinute + 7 * kMinute);
  // The urgent job's wait for the victim is allocated to it but not useful.
  EXPECT_NEAR(r.classes.at("P0").gpu_hours_allocated, 8 * Hours(grace + kHour), 1e-9);
  EXPECT_NEAR(r.classes.at("P0").gpu_hours_useful, 8.0, 1e-9);
  EXPECT_NEAR(r.overall.gpu_hours_useful,
              r.overall.gpu_hours_allocated - 8 * Hours(grace) - victim.gpu_hours_lost, 1e-9);
}

TEST(SimEviction, AGraceTooShortToCheckpointLosesWorkUpToTheSignal) {
  // Half the checkpoint's cost: the victim cannot save; the work since its checkpoint is lost,
  // and the grace period is the preemptor's wait (not counted twice).
  const Millis grace = 30 * kSecond;
  const RunResult r = EvictTraining(grace);
  const JobRecord& victim = Record(r, "victim");
  EXPECT_NEAR(victim.gpu_hours_lost, 8 * (0.5 + 5.0 / 60), 1e-12);
  const Millis restart = Record(r, "urgent").end;
  EXPECT_EQ(victim.end, restart + 5 * kMinute + 8 * kHour + 7 * kMinute);
  EXPECT_NEAR(r.overall.gpu_hours_useful,
              r.overall.gpu_hours_allocated - 8 * Hours(grace) - victim.gpu_hours_lost, 1e-9);
}

TEST(SimEviction, BatchJobsLoseAllProgress) {
  // Default grace period (30 s); a batch job keeps nothing whatever the grace.
  ClusterSpec spec = OneNode(8);
  Workload w;
  SimJob batch = MakeJob("batch", WorkKind::kBatch, 8, 0, 3 * kHour);
  batch.job.checkpoint_interval = 10 * kMinute;  // ignored: batch jobs do not checkpoint
  batch.checkpoint_cost = 0;
  w.jobs.push_back(batch);
  w.jobs.push_back(MakeJob("urgent", WorkKind::kBatch, 8, kHour, kHour, kP0));
  const RunResult r = RunSim(spec, w);
  const Millis grace = spec.priority_classes[kP1].grace_period;
  const JobRecord& victim = Record(r, "batch");
  EXPECT_EQ(victim.evictions, 1);
  EXPECT_NEAR(victim.gpu_hours_lost, 8 * 1.0, 1e-12);
  EXPECT_EQ(Record(r, "urgent").first_start, kHour + grace);
  const Millis restart = kHour + grace + kHour;
  EXPECT_EQ(Record(r, "urgent").end, restart);
  EXPECT_EQ(victim.end, restart + 3 * kHour);
}

// ---------------------------------------------------------------------------------------------
// Node outages.

TEST(SimOutage, AFailedNodeRequeuesItsJobsWhichRestartElsewhere) {
  ClusterSpec spec = Cluster();
  Add(spec, Nodes("n", 2, "H800", 8));
  Workload w;
  w.jobs.push_back(Training("t", 8, 0, 10 * kHour, kHour, kMinute, 5 * kMinute));
  const Millis fail = 2 * kHour + 32 * kMinute;
  // n-1 is down for the first hour, so the job starts on n-0; n-0 fails at 2h32m for an hour.
  w.outages.push_back({1, 0, kHour});
  w.outages.push_back({0, fail, kHour});
  const RunResult r = RunSim(spec, w);
  const JobRecord& j = Record(r, "t");
  EXPECT_EQ(j.first_start, 0);
  EXPECT_EQ(j.failures, 1);
  EXPECT_EQ(j.evictions, 0);
  EXPECT_NEAR(j.gpu_hours_lost, 8 * (0.5 + 5.0 / 60), 1e-12);
  // It restarts at once on n-1, from the checkpoint at 2h.
  EXPECT_EQ(j.end, fail + 5 * kMinute + 8 * kHour + 7 * kMinute);
  EXPECT_EQ(r.overall.failures, 1);
  EXPECT_EQ(r.overall.evictions, 0);

  // Healthy GPUs: 8 while n-1 is down, 16 after, 8 while n-0 is down, 16 when it is back.
  EXPECT_DOUBLE_EQ(SampleAt(r, 5 * kMinute)->healthy_gpus, 8);
  EXPECT_DOUBLE_EQ(SampleAt(r, kHour)->healthy_gpus, 8);
  EXPECT_DOUBLE_EQ(SampleAt(r, kHour + 5 * kMinute)->healthy_gpus, 16);
  EXPECT_DOUBLE_EQ(SampleAt(r, 2 * kHour + 35 * kMinute)->healthy_gpus, (2 * 16 + 3 * 8) / 5.0);
  EXPECT_DOUBLE_EQ(SampleAt(r, 3 * kHour)->healthy_gpus, 8);
  EXPECT_DOUBLE_EQ(SampleAt(r, 3 * kHour + 30 * kMinute)->healthy_gpus, 8);
  EXPECT_DOUBLE_EQ(SampleAt(r, 3 * kHour + 35 * kMinute)->healthy_gpus, (2 * 8 + 3 * 16) / 5.0);
  EXPECT_DOUBLE_EQ(SampleAt(r, 4 * kHour)->healthy_gpus, 16);
  EXPECT_DOUBLE_EQ(SampleAt(r, 3 * kHour)->allocated_gpus, 8);
}

TEST(SimOutage, ANodeBackFromItsOutageTakesWorkAgain) {
  // The only node is down for the first two hours: the job waits for it.
  ClusterSpec spec = OneNode(8);
  Workload w;
  w.jobs.push_back(MakeJob("b", WorkKind::kBatch, 8, 0, kHour));
  w.outages.push_back({0, 0, 2 * kHour});
  const RunResult r = RunSim(spec, w);
  EXPECT_EQ(Record(r, "b").first_start, 2 * kHour);
  EXPECT_EQ(Record(r, "b").end, 3 * kHour);
  EXPECT_DOUBLE_EQ(r.overall.longest_wait_s, Seconds(2 * kHour));
  EXPECT_EQ(SampleAt(r, kHour)->healthy_gpus, 0);
  EXPECT_EQ(SampleAt(r, kHour)->pending_jobs, 1);
}

TEST(SimOutage, BatchJobOnAFailedNodeLosesEverything) {
  ClusterSpec spec = Cluster();
  Add(spec, Nodes("n", 2, "H800", 8));
  Workload w;
  SimJob b = MakeJob("b", WorkKind::kBatch, 8, 0, 2 * kHour);
  b.job.restart_overhead = 10 * kMinute;
  w.jobs.push_back(b);
  w.outages.push_back({1, 0, 3 * kHour});
  w.outages.push_back({0, kHour, 4 * kHour});
  const RunResult r = RunSim(spec, w);
  const JobRecord& j = Record(r, "b");
  EXPECT_EQ(j.failures, 1);
  EXPECT_NEAR(j.gpu_hours_lost, 8 * (1.0 + 10.0 / 60), 1e-12);
  // n-1 is back at 3h: 10 minutes to restart, then all of the work again.
  EXPECT_EQ(j.end, 3 * kHour + 10 * kMinute + 2 * kHour);
}

// ---------------------------------------------------------------------------------------------
// Inference services.

InferenceService Service(double rate) {
  InferenceService s;
  s.name = "svc";
  s.replica = testing::GpuJob(0, 1, 1000);
  s.rate.base = rate;
  s.replica_rate = 10;
  s.target_utilization = 0.7;
  s.slo = 1000;
  return s;
}

const ServiceMetrics& Svc(const RunResult& r) {
  EXPECT_EQ(r.services.size(), 1u);
  return r.services.at(0);
}

TEST(SimInference, RateCurveFollowsTheDayAndItsSpikes) {
  RateCurve c;
  c.base = 10;
  c.diurnal = 0.5;
  EXPECT_NEAR(c.At(14 * kHour), 15, 1e-9);  // the default peak
  EXPECT_NEAR(c.At(38 * kHour), 15, 1e-9);
  EXPECT_NEAR(c.At(2 * kHour), 5, 1e-9);
  EXPECT_NEAR(c.At(8 * kHour), 10, 1e-9);
  c.diurnal = 0;
  c.spikes = {{kHour, kHour, 3}, {90 * kMinute, kHour, 2}};
  EXPECT_EQ(c.At(kHour - 1), 10);
  EXPECT_EQ(c.At(kHour), 30);
  EXPECT_EQ(c.At(90 * kMinute), 60);  // overlapping spikes multiply
  EXPECT_EQ(c.At(2 * kHour), 20);     // a spike ends before its end time
  EXPECT_EQ(c.At(150 * kMinute), 10);
  c.diurnal = 2;
  c.spikes.clear();
  EXPECT_EQ(c.At(2 * kHour), 0);  // never negative
}

TEST(SimInference, EnoughGpusServeTheWantedReplicas) {
  // 100 requests/s, 10 per replica, aiming at 70%: ceil(100 / 7) = 15 replicas.
  Workload w;
  w.services.push_back(Service(100));
  SimOptions o;
  o.check_invariants = true;
  o.horizon = kHour;
  const RunResult r = RunSim(OneNode(16), w, o);
  const ServiceMetrics& m = Svc(r);
  EXPECT_EQ(m.name, "svc");
  EXPECT_EQ(m.queue, "default");
  EXPECT_DOUBLE_EQ(m.mean_replicas_wanted, 15);
  EXPECT_DOUBLE_EQ(m.mean_replicas_serving, 15);
  EXPECT_NEAR(m.requests, 100.0 * 3600, 1e-6);
  EXPECT_EQ(m.timeout_fraction, 0);
  const double p99 = IntervalQuantile(MakeInterval(100, 10, 15, 60, 30000), 0.99, 30000);
  EXPECT_NEAR(m.latency_p99_ms, p99, 1e-6);
  EXPECT_GT(m.latency_p99_ms, std::log(100.0) / 10 * 1000 - 1e-2);  // at least the service time
  EXPECT_LT(m.latency_p99_ms, 1000);
  EXPECT_EQ(m.slo_miss_minutes, 0);
  EXPECT_EQ(r.workloads.at("svc").jobs_running_at_end, 15);
  EXPECT_EQ(r.workloads.at("svc").jobs_pending_at_end, 0);
  EXPECT_DOUBLE_EQ(SampleAt(r, 30 * kMinute)->service_replicas.at(0), 15);
  EXPECT_NEAR(SampleAt(r, 30 * kMinute)->service_latency_p99_ms.at(0), p99, 1e-6);
  EXPECT_DOUBLE_EQ(SampleAt(r, 30 * kMinute)->allocated_gpus, 15);
}

TEST(SimInference, ReplicasAreClampedToTheirBounds) {
  SimOptions o;
  o.check_invariants = true;
  o.horizon = 10 * kMinute;
  Workload low;
  low.services.push_back(Service(1));
  low.services[0].min_replicas = 3;
  EXPECT_DOUBLE_EQ(Svc(RunSim(OneNode(16), low, o)).mean_replicas_wanted, 3);
  Workload high;
  high.services.push_back(Service(100));
  high.services[0].max_replicas = 5;
  const RunResult r = RunSim(OneNode(16), high, o);
  EXPECT_DOUBLE_EQ(Svc(r).mean_replicas_wanted, 5);
  EXPECT_DOUBLE_EQ(Svc(r).mean_replicas_serving, 5);
  // 5 replicas serve 50 requests/s: half of the 100 time out.
  EXPECT_NEAR(Svc(r).timeout_fraction, 0.5, 1e-12);
}

TEST(SimInference, TooFewGpusTimeOutAndMissTheSlo) {
  Workload w;
  w.services.push_back(Service(100));
  w.services[0].slo = 200;
  SimOptions o;
  o.check_invariants = true;
  o.horizon = kHour;
  const RunResult r = RunSim(OneNode(4), w, o);
  const ServiceMetrics& m = Svc(r);
  EXPECT_DOUBLE_EQ(m.mean_replicas_wanted, 15);
  EXPECT_DOUBLE_EQ(m.mean_replicas_serving, 4);
  EXPECT_NEAR(m.timeout_fraction, 1 - 40.0 / 100, 1e-12);
  EXPECT_EQ(m.latency_p99_ms, 30000);
  EXPECT_DOUBLE_EQ(m.slo_miss_minutes, 60);
  EXPECT_EQ(r.workloads.at("svc").jobs_running_at_end, 4);
  EXPECT_EQ(r.workloads.at("svc").jobs_pending_at_end, 11);
}

TEST(SimInference, TheSloCountsOnlyTheIntervalsThatMissIt) {
  // 15 replicas serve with a P99 around 470 ms: within 1 s, beyond 200 ms.
  SimOptions o;
  o.check_invariants = true;
  o.horizon = kHour;
  Workload w;
  w.services.push_back(Service(100));
  w.services[0].slo = 200;
  EXPECT_DOUBLE_EQ(Svc(RunSim(OneNode(16), w, o)).slo_miss_minutes, 60);
  // A spike of 20 minutes beyond what 16 GPUs can serve: those minutes miss a 1 s objective.
  w.services[0].slo = 1000;
  w.services[0].rate.spikes.push_back({20 * kMinute, 20 * kMinute, 3});
  const RunResult run = RunSim(OneNode(16), w, o);  // (m points into it)
  const ServiceMetrics& m = Svc(run);
  EXPECT_DOUBLE_EQ(m.slo_miss_minutes, 20);
  EXPECT_GT(m.timeout_fraction, 0);
}

TEST(SimInference, StartupDelaysServingOfReplicasStartedAfterTimeZero) {
  // 15 replicas from time 0; x2 from 10m to 20m wants 29, 14 more, which serve 30 s after they
  // start at 10m. The 15 started at 0 serve at once: the service was up before the simulated
  // time (a cold start at 0 would time out every request of the first 30 s, a false spike).
  Workload w;
  w.services.push_back(Service(100));
  w.services[0].startup = 30 * kSecond;
  w.services[0].rate.spikes.push_back({10 * kMinute, 10 * kMinute, 2});
  SimOptions o;
  o.check_invariants = true;
  o.horizon = kHour;
  const RunResult run = RunSim(OneNode(32), w, o);  // (m points into it)
  const ServiceMetrics& m = Svc(run);
  EXPECT_NEAR(m.mean_replicas_serving, (15 * 60 + 14 * 9.5) / 60, 1e-9);
  const double steady = IntervalQuantile(MakeInterval(100, 10, 15, 60, 30000), 0.99, 30000);
  ASSERT_FALSE(run.series.empty());
  EXPECT_EQ(run.series[0].t, 5 * kMinute);
  EXPECT_NEAR(run.series[0].service_latency_p99_ms.at(0), steady, 1e-6);
  EXPECT_NEAR(SampleAt(run, 5 * kMinute)->busy_gpus, 15, 1e-9);
}

TEST(SimInference, P99PerWindowAndTheWorstWindow) {
  // 100 requests/s on 15 replicas for 3 hours, but x3 from 70m to 90m: 43 replicas wanted, 16
  // GPUs; the 16th replica serves from 72m (2 minutes of startup). The first hour and the last
  // are steady, the second times out 28% of its requests.
  Workload w;
  w.services.push_back(Service(100));
  w.services[0].startup = 2 * kMinute;
  w.services[0].rate.spikes.push_back({70 * kMinute, 20 * kMinute, 3});
  SimOptions o;
  o.check_invariants = true;
  o.horizon = 3 * kHour;
  const RunResult run = RunSim(OneNode(16), w, o);
  const ServiceMetrics& m = Svc(run);
  const double steady = IntervalQuantile(MakeInterval(100, 10, 15, 60, 30000), 0.99, 30000);
  const double spike = MixtureQuantile(
      {MakeInterval(100, 10, 15, 40 * 60, 30000), MakeInterval(300, 10, 15, 2 * 60, 30000),
       MakeInterval(300, 10, 16, 18 * 60, 30000)},
      0.99, 30000);
  EXPECT_EQ(spike, 30000);
  EXPECT_EQ(m.latency_window, kHour);
  ASSERT_EQ(m.latency_p99_by_window_ms.size(), 3u);
  EXPECT_NEAR(m.latency_p99_by_window_ms[0], steady, 1e-6);
  EXPECT_NEAR(m.latency_p99_by_window_ms[1], spike, 1e-6);
  EXPECT_NEAR(m.latency_p99_by_window_ms[2], steady, 1e-6);
  EXPECT_DOUBLE_EQ(m.latency_p99_worst_window_ms, m.latency_p99_by_window_ms[1]);
  EXPECT_EQ(m.windows_over_slo, 1);  // the SLO is 1 s
  EXPECT_DOUBLE_EQ(m.slo_ms, 1000);
  EXPECT_LT(steady, 1000);

  // Windows of 20 minutes: the fifth (80m to 100m) holds the last 10 minutes of the spike, the
  // fourth (60m to 80m) its first 10; a horizon of 170m leaves a last window of 10 minutes.
  o.latency_window = 20 * kMinute;
  o.horizon = 170 * kMinute;
  const RunResult shorter = RunSim(OneNode(16), w, o);
  const ServiceMetrics& n = Svc(shorter);
  ASSERT_EQ(n.latency_p99_by_window_ms.size(), 9u);
  EXPECT_NEAR(n.latency_p99_by_window_ms[0], steady, 1e-6);
  EXPECT_EQ(n.latency_p99_by_window_ms[3], 30000);
  EXPECT_EQ(n.latency_p99_by_window_ms[4], 30000);
  EXPECT_NEAR(n.latency_p99_by_window_ms[5], steady, 1e-6);
  EXPECT_NEAR(n.latency_p99_by_window_ms[8], steady, 1e-6);
  EXPECT_EQ(n.windows_over_slo, 2);
}

TEST(SimInference, ScaleDownStopsPendingReplicasFirst) {
  // 14 requests/s want 2 replicas; x3 from 10m wants 6 (4 GPUs: 2 stay pending); x2 from 20m
  // wants 4 (the 2 pending ones stop, the 4 running stay); from 30m, 2 again.
  Workload w;
  w.services.push_back(Service(14));
  w.services[0].rate.spikes = {{10 * kMinute, 10 * kMinute, 3}, {20 * kMinute, 10 * kMinute, 2}};
  SimOptions o;
  o.check_invariants = true;
  o.horizon = kHour;
  const RunResult r = RunSim(OneNode(4), w, o);
  const ServiceMetrics& m = Svc(r);
  EXPECT_DOUBLE_EQ(m.mean_replicas_wanted, (2 * 40 + 6 * 10 + 4 * 10) / 60.0);
  EXPECT_DOUBLE_EQ(m.mean_replicas_serving, (2 * 60 + 2 * 20) / 60.0);
  ASSERT_EQ(r.jobs.size(), 6u);
  EXPECT_EQ(Record(r, "svc-0").first_start, 0);
  EXPECT_EQ(Record(r, "svc-1").first_start, 0);
  EXPECT_EQ(Record(r, "svc-2").first_start, 10 * kMinute);
  EXPECT_EQ(Record(r, "svc-3").first_start, 10 * kMinute);
  EXPECT_EQ(Record(r, "svc-4").first_start, -1);
  EXPECT_EQ(Record(r, "svc-5").first_start, -1);
  EXPECT_EQ(r.workloads.at("svc").jobs_running_at_end, 2);
  EXPECT_EQ(r.workloads.at("svc").jobs_pending_at_end, 0);
  EXPECT_DOUBLE_EQ(SampleAt(r, 15 * kMinute)->service_replicas.at(0), 4);
  EXPECT_EQ(SampleAt(r, 15 * kMinute)->pending_jobs, 2);
  EXPECT_DOUBLE_EQ(SampleAt(r, 25 * kMinute)->service_replicas.at(0), 4);
  EXPECT_EQ(SampleAt(r, 25 * kMinute)->pending_jobs, 0);
  EXPECT_DOUBLE_EQ(SampleAt(r, 35 * kMinute)->service_replicas.at(0), 2);
  EXPECT_DOUBLE_EQ(SampleAt(r, 35 * kMinute)->allocated_gpus, 2);
}

TEST(SimInference, EvictedReplicasStopServingAtTheSignalAndComeBack) {
  // 4 replicas on the 4 GPUs; a P0 batch job takes them at 10m for 10 minutes. The replicas get
  // the default 30 s grace: the P0 job runs from 10m30s to 20m30s, the replicas are requeued at
  // 10m30s and start again at 20m30s.
  Workload w;
  w.services.push_back(Service(28));
  SimJob urgent = MakeJob("urgent", WorkKind::kBatch, 4, 10 * kMinute, 10 * kMinute, kP0);
  w.jobs.push_back(urgent);
  SimOptions o;
  o.check_invariants = true;
  o.horizon = kHour;
  const RunResult r = RunSim(OneNode(4), w, o);
  const ServiceMetrics& m = Svc(r);
  EXPECT_DOUBLE_EQ(m.mean_replicas_wanted, 4);
  EXPECT_EQ(Record(r, "urgent").first_start, 10 * kMinute + 30 * kSecond);
  EXPECT_EQ(Record(r, "urgent").end, 20 * kMinute + 30 * kSecond);
  EXPECT_DOUBLE_EQ(m.mean_replicas_serving, 4 * (10 + 39.5) / 60);
  EXPECT_EQ(r.workloads.at("svc").evictions, 4);
  EXPECT_EQ(r.workloads.at("svc").gpu_hours_lost, 0);
  EXPECT_EQ(r.workloads.at("svc").jobs_running_at_end, 4);
  // Nothing serves from the signal until 20m: all requests time out; from 20m to 21m two
  // replicas on average serve 20 of the 28 requests per second.
  EXPECT_NEAR(m.timeout_fraction, (10 + (1 - 20.0 / 28)) / 60, 1e-9);
  EXPECT_DOUBLE_EQ(SampleAt(r, 15 * kMinute)->service_replicas.at(0), 0);
  EXPECT_DOUBLE_EQ(SampleAt(r, 25 * kMinute)->service_replicas.at(0), 4);
}

TEST(SimInference, P99PerHourByHandOnOneReplica) {
  // One replica (mu = 10/s) is M/M/1: a request's time in the system is exponential with rate
  // mu - lambda, its P99 ln(100) / (mu - lambda). 5 requests/s give 921.0 ms; the second hour
  // runs at 8 requests/s (x1.6): 2302.6 ms. The run's P99 over all requests lies between.
  Workload w;
  w.services.push_back(Service(5));
  w.services[0].max_replicas = 1;
  w.services[0].rate.spikes.push_back({kHour, kHour, 1.6});
  SimOptions o;
  o.check_invariants = true;
  o.horizon = 3 * kHour;
  const RunResult run = RunSim(OneNode(1), w, o);
  const ServiceMetrics& m = Svc(run);
  ASSERT_EQ(m.latency_p99_by_window_ms.size(), 3u);
  EXPECT_NEAR(m.latency_p99_by_window_ms[0], std::log(100.0) / 5 * 1000, 0.01);
  EXPECT_NEAR(m.latency_p99_by_window_ms[1], std::log(100.0) / 2 * 1000, 0.01);
  EXPECT_NEAR(m.latency_p99_by_window_ms[2], std::log(100.0) / 5 * 1000, 0.01);
  EXPECT_NEAR(m.latency_p99_worst_window_ms, 2302.585, 0.01);
  EXPECT_EQ(m.windows_over_slo, 1);  // the SLO is 1 s
  EXPECT_LT(m.latency_p99_ms, m.latency_p99_worst_window_ms);
  EXPECT_GT(m.latency_p99_ms, m.latency_p99_by_window_ms[0]);
}

TEST(SimSeries, AllocationPerGpuModel) {
  // A 4-GPU job fits only the H800 node; the A100 node stays idle. Each sample's GPUs per model
  // add up to its allocated GPUs.
  ClusterSpec spec = Cluster();
  Add(spec, Nodes("a", 1, "A100", 2));
  Add(spec, Nodes("h", 1, "H800", 4));
  Workload w;
  w.jobs.push_back(MakeJob("big", WorkKind::kBatch, 4, 0, 30 * kMinute));
  SimOptions o;
  o.check_invariants = true;
  o.horizon = kHour;
  o.sample_interval = 20 * kMinute;
  const RunResult r = RunSim(spec, w, o);
  ASSERT_EQ(r.gpu_types.size(), 2u);
  ASSERT_EQ(r.gpu_type_totals.size(), 2u);
  const std::size_t h800 = r.gpu_types[0] == "H800" ? 0 : 1;
  const std::size_t a100 = 1 - h800;
  EXPECT_EQ(r.gpu_types[a100], "A100");
  EXPECT_EQ(r.gpu_type_totals[h800], 4);
  EXPECT_EQ(r.gpu_type_totals[a100], 2);
  ASSERT_EQ(r.series.size(), 3u);
  EXPECT_DOUBLE_EQ(r.series[0].type_allocated_gpus.at(h800), 4);
  EXPECT_DOUBLE_EQ(r.series[1].type_allocated_gpus.at(h800), 2);  // ends at 30m
  EXPECT_DOUBLE_EQ(r.series[2].type_allocated_gpus.at(h800), 0);
  for (const Sample& s : r.series) {
    EXPECT_DOUBLE_EQ(s.type_allocated_gpus.at(a100), 0);
    EXPECT_DOUBLE_EQ(s.type_allocated_gpus.at(h800) + s.type_allocated_gpus.at(a100),
                     s.allocated_gpus);
  }
}

TEST(SimMetrics, MeanMedianP95AndP99OfJctAndWait) {
  // 20 one-GPU jobs of 1 to 20 minutes on 20 GPUs: each runs at once, its JCT its work. The
  // quantiles are the nearest rank: the median the 10th value, P95 the 19th, P99 the 20th.
  Workload w;
  for (int i = 1; i <= 20; ++i) {
    w.jobs.push_back(MakeJob("j" + std::to_string(i), WorkKind::kBatch, 1, 0, i * kMinute));
  }
  const RunResult r = RunSim(OneNode(20), w);
  EXPECT_EQ(r.overall.jct.count, 20);
  EXPECT_DOUBLE_EQ(r.overall.jct.mean, 10.5 * 60);
  EXPECT_DOUBLE_EQ(r.overall.jct.p50, 10 * 60);
  EXPECT_DOUBLE_EQ(r.overall.jct.p95, 19 * 60);
  EXPECT_DOUBLE_EQ(r.overall.jct.p99, 20 * 60);
  EXPECT_EQ(r.overall.wait.count, 20);
  EXPECT_DOUBLE_EQ(r.overall.wait.p95, 0);
}

TEST(SimInference, NeedsAHorizon) {
  Workload w;
  w.services.push_back(Service(1));
  EXPECT_FALSE(Simulate(OneNode(4), {}, w, {}, "test").ok());
}

// ---------------------------------------------------------------------------------------------
// Termination and the horizon.

TEST(SimTermination, WithoutAHorizonJobsThatNeverFitEndTheRun) {
  Workload w;
  w.jobs.push_back(MakeJob("big", WorkKind::kBatch, 16, 0, kHour));
  w.jobs.push_back(MakeJob("ok", WorkKind::kBatch, 8, 0, 2 * kHour));
  const RunResult r = RunSim(OneNode(8), w);
  EXPECT_EQ(r.horizon, 2 * kHour);
  EXPECT_EQ(r.overall.jobs_submitted, 2);
  EXPECT_EQ(r.overall.jobs_completed, 1);
  EXPECT_EQ(r.overall.jobs_pending_at_end, 1);
  EXPECT_EQ(Record(r, "big").first_start, -1);
  EXPECT_EQ(Record(r, "big").end, -1);
  EXPECT_DOUBLE_EQ(r.overall.longest_wait_s, Seconds(2 * kHour));
  EXPECT_EQ(r.overall.wait.count, 1);
  EXPECT_EQ(r.series.back().pending_jobs, 1);

  // Alone, it ends the run at once.
  Workload alone;
  alone.jobs.push_back(MakeJob("big", WorkKind::kBatch, 16, 10 * kMinute, kHour));
  const RunResult a = RunSim(OneNode(8), alone);
  EXPECT_EQ(a.horizon, 10 * kMinute);
  EXPECT_EQ(a.overall.jobs_pending_at_end, 1);
  EXPECT_LT(a.cycles, 3);
}

TEST(SimTermination, WithoutAHorizonOutagesAfterTheLastJobDoNotExtendTheRun) {
  ClusterSpec spec = Cluster();
  Add(spec, Nodes("n", 2, "H800", 8));
  Workload w;
  w.jobs.push_back(MakeJob("b", WorkKind::kBatch, 8, 0, kHour));
  w.outages.push_back({1, 30 * kMinute, 3 * kHour});  // down when the job ends, back at 3h30m
  w.outages.push_back({0, 5 * kHour, kHour});         // fails after everything completed
  const RunResult r = RunSim(spec, w);
  EXPECT_EQ(Record(r, "b").end, kHour);
  EXPECT_EQ(r.horizon, kHour);
  EXPECT_DOUBLE_EQ(r.gpu_allocation, 8.0 / 16);
  EXPECT_EQ(r.series.back().t, kHour);
  // But a pending job waits for a node to come back.
  Workload wait;
  wait.jobs.push_back(MakeJob("b", WorkKind::kBatch, 8, 0, kHour));
  SimJob both = MakeJob("c", WorkKind::kBatch, 8, 0, kHour);
  both.job.groups[0].count = 2;  // a gang of two whole nodes
  wait.jobs.push_back(both);
  wait.outages.push_back({1, 30 * kMinute, 3 * kHour});
  const RunResult rw = RunSim(spec, wait);
  EXPECT_EQ(Record(rw, "c").first_start, 3 * kHour + 30 * kMinute);
  EXPECT_EQ(rw.horizon, 4 * kHour + 30 * kMinute);
}

TEST(SimTermination, TheHorizonCutsTheRun) {
  Workload w;
  w.jobs.push_back(MakeJob("done", WorkKind::kBatch, 2, 0, 30 * kMinute));
  w.jobs.push_back(MakeJob("running", WorkKind::kBatch, 2, 30 * kMinute, 2 * kHour));
  w.jobs.push_back(Training("training", 2, 0, 3 * kHour, 0, 0, 0));
  w.jobs.push_back(MakeJob("later", WorkKind::kBatch, 2, 2 * kHour, kHour));
  SimOptions o;
  o.check_invariants = true;
  o.horizon = kHour;
  const RunResult r = RunSim(OneNode(8), w, o);
  EXPECT_EQ(r.horizon, kHour);
  EXPECT_EQ(r.overall.jobs_submitted, 3);  // "later" comes after the horizon
  EXPECT_EQ(r.jobs.size(), 3u);
  EXPECT_EQ(r.overall.jobs_completed, 1);
  EXPECT_EQ(r.overall.jobs_running_at_end, 2);
  EXPECT_DOUBLE_EQ(r.overall.gpu_hours_allocated, 2 * 0.5 + 2 * 0.5 + 2 * 1.0);
  // An unfinished training job counts until the horizon.
  EXPECT_EQ(r.overall.training_completion.count, 1);
  EXPECT_DOUBLE_EQ(r.overall.training_completion.max, Seconds(kHour));
  EXPECT_EQ(r.series.back().t, kHour);
  EXPECT_EQ(r.series.size(), 12u);
  EXPECT_DOUBLE_EQ(r.gpu_allocation, 4.0 / 8);
}

// ---------------------------------------------------------------------------------------------
// Queues.

TEST(SimQueues, GuaranteeMeanAndTimeBelowTheGuarantee) {
  ClusterSpec spec = Cluster();
  Add(spec, Nodes("n", 1, "H800", 8));
  spec.queues = {testing::Queue("root"), testing::Queue("a", "root"), testing::Queue("b", "root"),
                 testing::Queue("c")};
  spec.queues[1].quota["gpu"].nominal = MilliGpu(4000);
  spec.queues[2].quota["gpu"].nominal = MilliGpu(4000);
  spec.queues[3].quota["H800"].nominal = MilliGpu(2000);  // a guarantee of one GPU type
  // b borrows a's idle half with a P0 job that cannot be evicted; a's job waits 1h30m for it.
  Workload w;
  SimJob b = MakeJob("b", WorkKind::kBatch, 8, 0, 2 * kHour, kP0);
  b.job.queue = 2;
  SimJob a = MakeJob("a", WorkKind::kBatch, 4, 30 * kMinute, kHour);
  a.job.queue = 1;
  w.jobs = {b, a};
  const RunResult r = RunSim(spec, w);
  EXPECT_EQ(Record(r, "a").first_start, 2 * kHour);
  EXPECT_EQ(r.horizon, 3 * kHour);
  ASSERT_EQ(r.queue_names, (std::vector<std::string>{"a", "b", "c"}));
  const GroupMetrics& qa = r.queues.at("a");
  const GroupMetrics& qb = r.queues.at("b");
  const GroupMetrics& qc = r.queues.at("c");
  EXPECT_EQ(qa.guarantee_gpus, 4);
  EXPECT_EQ(qb.guarantee_gpus, 4);
  EXPECT_EQ(qc.guarantee_gpus, 2);
  EXPECT_DOUBLE_EQ(qa.mean_gpus, 4.0 * 1 / 3);
  EXPECT_DOUBLE_EQ(qb.mean_gpus, 8.0 * 2 / 3);
  EXPECT_EQ(qc.mean_gpus, 0);
  EXPECT_DOUBLE_EQ(qa.below_guarantee_hours, 1.5);
  EXPECT_EQ(qb.below_guarantee_hours, 0);
  EXPECT_EQ(qc.below_guarantee_hours, 0);  // nothing pending
  EXPECT_DOUBLE_EQ(qa.longest_wait_s, Seconds(90 * kMinute));
  EXPECT_EQ(qa.jobs_completed, 1);
  EXPECT_EQ(r.queues.count("root"), 0u);  // leaves only
  const Sample* s = SampleAt(r, kHour);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->queue_allocated_gpus, (std::vector<double>{0, 8, 0}));
  EXPECT_EQ(s->queue_pending, (std::vector<std::int64_t>{1, 0, 0}));
}

TEST(SimQueues, RejectsJobsOfUnknownQueuesOrClasses) {
  Workload w;
  w.jobs.push_back(MakeJob("x", WorkKind::kBatch, 1, 0, kHour));
  w.jobs[0].job.queue = 5;
  EXPECT_FALSE(Simulate(OneNode(8), {}, w, {}, "test").ok());
  w.jobs[0].job.queue = 0;
  w.jobs[0].job.priority_class = 9;
  EXPECT_FALSE(Simulate(OneNode(8), {}, w, {}, "test").ok());
  w.jobs[0].job.priority_class = kP1;
  w.outages.push_back({3, 0, kHour});
  EXPECT_FALSE(Simulate(OneNode(8), {}, w, {}, "test").ok());
}

}  // namespace
}  // namespace arbiter::sim
