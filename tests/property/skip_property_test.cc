// Skipping the cycles that nothing changed (SimOptions::skip_unchanged_cycles, Plan::stable_until)
// changes no decision: over random simulations that exercise every input the promise reads
// (aging that reaches max_age, jobs that start to starve, fair share with and without a refresh
// period, backfill reservations behind estimates that hold or overrun, preemption guards that
// lift, a loss threshold that checkpoints lower, strict-FIFO queues, node outages) and the
// capacity promise (ends and arrivals that leave every waiting job short, arrivals behind a
// blocked head), and the jobs parked behind a strict-FIFO anchor (Engine::StaysBehind), and the
// cycles that stop once none of the rest of the order can start (EngineOptions::explain_every_job),
// the run with these shortcuts and the run without them start, evict and end every job at the same
// times. Seeded and deterministic.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "sim/sim.h"
#include "testing/builders.h"
#include "testing/random.h"

namespace arbiter::sim {
namespace {

using testing::PropertyCases;
using testing::Random;

constexpr Millis kSecond = kMillisPerSecond;
constexpr Millis kMinute = 60 * kSecond;
constexpr Millis kHour = 60 * kMinute;

using Case = testing::SimCase;

Case RandomCase(Random& rnd) {
  Case c;
  c.cluster = testing::Cluster({"rack"});
  const int nodes = static_cast<int>(rnd.In(2, 5));
  for (int n = 0; n < nodes; ++n) {
    std::vector<NodeSpec> node = testing::Nodes("n" + std::to_string(n), 1, "H800",
                                                static_cast<int>(rnd.Of<std::int64_t>({2, 4, 8})));
    node[0].domains = {"rack-" + std::to_string(n % 2)};
    testing::Add(c.cluster, std::move(node));
  }
  c.cluster.queues = {testing::Queue("org")};
  const int queues = static_cast<int>(rnd.In(1, 3));
  for (int q = 0; q < queues; ++q) {
    QueueSpec spec = testing::Queue("q" + std::to_string(q), "org");
    spec.priority = static_cast<std::int32_t>(rnd.In(0, 2));
    spec.weight = static_cast<std::int32_t>(rnd.In(1, 3));
    spec.preempt_lower_priority = rnd.Chance(20);
    spec.strict_fifo = rnd.Chance(25);
    if (rnd.Chance(50)) {
      QuotaSpec quota;
      quota.nominal = MilliGpu(rnd.In(1, 8) * kMilliPerGpu);
      if (rnd.Chance(50)) quota.borrowing_limit = MilliGpu(rnd.In(0, 6) * kMilliPerGpu);
      spec.quota[kAllGpusResource] = quota;
    }
    c.cluster.queues.push_back(spec);
  }
  for (PriorityClassSpec& pc : c.cluster.priority_classes) {
    pc.min_runtime = rnd.Of<Millis>({0, 0, 3 * kMinute, 10 * kMinute});
    pc.grace_period = rnd.Of<Millis>({0, 30 * kSecond});
    pc.max_evictions = static_cast<std::int32_t>(rnd.In(0, 2));
    pc.eviction_window = kHour;
    pc.eviction_cooldown = rnd.Of<Millis>({0, 0, 5 * kMinute});
  }
  c.cluster.fair_share_half_life = rnd.Of<Millis>({10 * kMinute, kHour});
  c.cluster.fair_share_period = rnd.Of<Millis>({0, kMinute, 5 * kMinute});
  c.engine.ordering.fair_share = rnd.Of<double>({0, 2000, 20000});
  c.engine.ordering.age = rnd.Of<double>({0, 1000, 20000});
  c.engine.ordering.max_age = rnd.Of<Millis>({20 * kMinute, kHour, 7 * 24 * kHour});
  c.engine.ordering.starvation_wait = rnd.Of<Millis>({0, 0, 30 * kMinute, 2 * kHour});
  c.engine.preemption.enabled = rnd.Chance(70);
  c.engine.preemption.max_gpus_per_cycle = rnd.Of<std::int64_t>({-1, 2 * kMilliPerGpu});
  c.engine.preemption.max_loss_per_gpu = rnd.Of<std::int64_t>({-1, -1, 10 * kMinute});
  c.engine.preemption.max_attempts_per_cycle = static_cast<int>(rnd.Of<std::int64_t>({2, 32}));
  c.engine.backfill.reservations = static_cast<int>(rnd.In(0, 2));
  c.engine.backfill.overrun_grace = rnd.Of<Millis>({kMinute, 5 * kMinute});

  const int jobs = static_cast<int>(rnd.In(20, 70));
  for (int j = 0; j < jobs; ++j) {
    SimJob job;
    const std::int64_t gpus = rnd.Of<std::int64_t>({1, 1, 2, 4, 8});
    job.job = testing::RandomGpuJob(rnd, j, gpus, 20, queues);
    job.job.submit_time = rnd.Chance(30) ? rnd.In(0, 6) * 10 * kMinute : rnd.In(0, 2 * kHour);
    job.work = rnd.In(1, 50) * kMinute + rnd.In(0, 999);
    // Estimates that hold, that overrun (the reservation slides) and none.
    if (rnd.Chance(70)) job.job.runtime_estimate = job.work + rnd.In(-10, 10) * kMinute;
    if (job.job.runtime_estimate < 0) job.job.runtime_estimate = 0;
    if (rnd.Chance(40)) {
      job.kind = WorkKind::kTraining;
      job.job.checkpoint_interval = rnd.Of<Millis>({5 * kMinute, 10 * kMinute});
      job.checkpoint_cost = rnd.Of<Millis>({0, 20 * kSecond});
      job.job.restart_overhead = rnd.Of<Millis>({0, kMinute});
    }
    job.workload = "random";
    c.workload.jobs.push_back(std::move(job));
  }
  if (rnd.Chance(30)) {
    c.workload.outages.push_back(
        {static_cast<NodeId>(rnd.In(0, nodes - 1)), rnd.In(10, 90) * kMinute, 20 * kMinute});
  }
  c.options.horizon = rnd.Chance(50) ? 4 * kHour : 0;
  c.options.check_invariants = true;
  c.options.cycle_period = rnd.Of<Millis>({30 * kSecond, 45 * kSecond});
  c.options.min_cycle_interval = rnd.Of<Millis>({kSecond, 5 * kSecond});
  c.options.sample_interval = 0;
  return c;
}

// The same cases under least attained service (las, las-2d or gittins, thresholds of minutes so
// that jobs cross them, with or without starvation promotion): running jobs crossing a threshold
// and waiting jobs promoted change the decisions with time alone.
Case RandomLasCase(Random& rnd) {
  Case c = RandomCase(rnd);
  OrderingWeights& w = c.engine.ordering;
  w.policy = rnd.Of<OrderPolicy>({OrderPolicy::kLas, OrderPolicy::kLas2d, OrderPolicy::kGittins});
  const Millis unit = ServiceInGpuTime(w.policy) ? 2 * kMinute : kMinute;
  w.gittins_quantum = rnd.In(5, 60) * kMinute;
  w.gittins_window = static_cast<std::int32_t>(rnd.In(3, 30));
  w.las_thresholds = {rnd.In(3, 10) * unit + rnd.In(0, 999)};
  if (rnd.Chance(60)) w.las_thresholds.push_back(w.las_thresholds[0] + rnd.In(5, 30) * unit);
  w.starvation_factor = rnd.Of<double>({0, 0.5, 1, 2});
  // Always a horizon: where a class has no guard (min_runtime, max_evictions, cooldown), jobs
  // without checkpoints that run longer than a threshold evict each other as they cross it and
  // are promoted back, and may never finish (lint's preemptible-class-without-protection).
  c.options.horizon = 6 * kHour;
  return c;
}

// The LAS cases on two GPU models with a throughput matrix, jobs of three kinds (one without a
// row), each job on its fastest model and, under max-min fairness, its service counted in
// normalised throughput: a running job crosses a threshold at its own rate. Or, in some, Gavel's
// rounds.
Case RandomHeterogeneousCase(Random& rnd) {
  Case c = RandomLasCase(rnd);
  for (std::size_t n = 1; n < c.cluster.nodes.size(); n += 2) {
    for (DeviceSpec& d : c.cluster.nodes[n].devices) d.type = "L40S";
  }
  c.cluster.throughput.rows = {{"fast", {{"H800", rnd.Of<double>({2, 3.5})}, {"L40S", 1}}},
                               {"slow", {{"H800", 1}, {"L40S", rnd.Of<double>({0.25, 0.7})}}}};
  c.engine.ordering.heterogeneity = rnd.Of<HeterogeneityPolicy>(
      {HeterogeneityPolicy::kMaxMinFairness, HeterogeneityPolicy::kMaxMinFairness,
       HeterogeneityPolicy::kMaxThroughput});
  // Or Gavel's allocation for the same objective, realised in rounds of minutes.
  if (rnd.Chance(30)) {
    c.engine.ordering.policy = OrderPolicy::kGavel;
    c.engine.ordering.gavel_round = rnd.In(2, 20) * kMinute;
  }
  for (SimJob& job : c.workload.jobs) {
    const std::string kind = rnd.Of<std::string>({"fast", "slow", "other"});
    job.job.labels["model"] = kind;
  }
  return c;
}

// The cases where the capacity promise (Plan::capacity) lets ends and arrivals pass without a
// cycle: preemption mostly off, or on without a rule any class may use; strict-FIFO queues whose
// blocked heads the arrivals queue behind (or, of a higher class, jump ahead of); bursts of
// arrivals onto a full cluster of nodes of different sizes; two GPU models shared out by
// max-throughput.
Case RandomBacklogCase(Random& rnd) {
  Case c = RandomCase(rnd);
  c.engine.preemption.enabled = rnd.Chance(30);
  for (QueueSpec& q : c.cluster.queues) {
    if (q.parent.empty()) continue;
    q.strict_fifo = rnd.Chance(60);
    q.preempt_lower_priority = false;
    q.preempt_within_queue = rnd.Chance(30);
    q.reclaim = rnd.Chance(30);
  }
  // Two GPU models under max-throughput: the share-out of the models reads every waiting job,
  // those behind a blocked head too.
  if (rnd.Chance(30)) {
    for (std::size_t n = 1; n < c.cluster.nodes.size(); n += 2) {
      for (DeviceSpec& d : c.cluster.nodes[n].devices) d.type = "L40S";
    }
    c.cluster.throughput.rows = {{"fast", {{"H800", rnd.Of<double>({2, 3.5})}, {"L40S", 1}}},
                                 {"slow", {{"H800", 1}, {"L40S", rnd.Of<double>({0.25, 0.7})}}}};
    c.engine.ordering.heterogeneity = HeterogeneityPolicy::kMaxThroughput;
    for (SimJob& job : c.workload.jobs)
      job.job.labels["model"] = rnd.Of<std::string>({"fast", "slow", "other"});
  }
  const std::size_t first = c.workload.jobs.size();
  const int bursts = static_cast<int>(rnd.In(1, 4));
  for (int b = 0; b < bursts; ++b) {
    const Millis at = rnd.In(0, 3 * 60) * kMinute / 3;
    const int n = static_cast<int>(rnd.In(5, 25));
    for (int i = 0; i < n; ++i) {
      SimJob job =
          c.workload
              .jobs[static_cast<std::size_t>(rnd.In(0, static_cast<std::int64_t>(first) - 1))];
      job.job.name = "burst" + std::to_string(b) + "-" + std::to_string(i);
      job.job.submit_time = at + rnd.In(0, 3) * kSecond;
      c.workload.jobs.push_back(std::move(job));
    }
  }
  return c;
}

// The jobs the skipping runs parked behind a strict-FIFO anchor, and the runs that parked some.
struct Parking {
  std::int64_t jobs = 0;
  std::int64_t reruns = 0;
  int runs = 0;
  std::int64_t stopped_early = 0;  // cycles that left the rest of the order untaken
};

void CheckSkipping(Case (*make)(Random&), int scenarios, const char* label,
                   Parking* parked = nullptr) {
  std::int64_t skipped = 0, run = 0;
  int with_skips = 0;
  Parking parking;
  for (int seed = 1; seed <= scenarios; ++seed) {
    Random rnd(static_cast<std::uint64_t>(seed) * 0x2545f4914f6cdd1dULL);
    const Case c = make(rnd);
    SimOptions every = c.options;
    every.skip_unchanged_cycles = false;
    Result<RunResult> all = Simulate(c.cluster, c.engine, c.workload, every, "every");
    Result<RunResult> some = Simulate(c.cluster, c.engine, c.workload, c.options, "skipping");
    ASSERT_TRUE(all.ok()) << all.status().message();
    ASSERT_TRUE(some.ok()) << some.status().message();
    const std::string where = "seed " + std::to_string(seed);
    EXPECT_EQ(all->cycles_skipped, 0) << where;
    EXPECT_EQ(all->jobs_parked, 0) << where;
    EXPECT_EQ(some->cycles + some->cycles_skipped, all->cycles) << where;
    EXPECT_EQ(some->horizon, all->horizon) << where;
    ASSERT_EQ(some->jobs.size(), all->jobs.size()) << where;
    for (std::size_t i = 0; i < all->jobs.size(); ++i) {
      const JobRecord& a = all->jobs[i];
      const JobRecord& b = some->jobs[i];
      const std::string job = where + ", job " + a.name;
      EXPECT_EQ(b.first_start, a.first_start) << job;
      EXPECT_EQ(b.end, a.end) << job;
      EXPECT_EQ(b.evictions, a.evictions) << job;
      EXPECT_EQ(b.failures, a.failures) << job;
      EXPECT_EQ(b.gpu_hours_lost, a.gpu_hours_lost) << job;
    }
    EXPECT_EQ(some->overall.evictions, all->overall.evictions) << where;
    skipped += some->cycles_skipped;
    run += some->cycles;
    if (some->cycles_skipped > 0) ++with_skips;
    parking.jobs += some->jobs_parked;
    parking.reruns += some->cycles_rerun;
    parking.stopped_early += some->cycles_stopped_early;
    EXPECT_EQ(all->cycles_stopped_early, 0) << where;
    if (some->jobs_parked > 0) ++parking.runs;
  }
  // The property is not vacuous: most runs skip, and skipping saves a good part of the cycles.
  EXPECT_GE(with_skips, scenarios / 2);
  EXPECT_GT(skipped, run / 4);
  std::printf(
      "skip property (%s): %d of %d runs skipped cycles; %lld cycles run, %lld skipped; %d runs "
      "parked %lld jobs, %lld cycles rerun; %lld cycles stopped early\n",
      label, with_skips, scenarios, static_cast<long long>(run), static_cast<long long>(skipped),
      parking.runs, static_cast<long long>(parking.jobs), static_cast<long long>(parking.reruns),
      static_cast<long long>(parking.stopped_early));
  if (parked) *parked = parking;
}

TEST(SkipProperty, SkippedCyclesChangeNoDecision) {
  CheckSkipping(RandomCase, PropertyCases(400), "multifactor");
}

TEST(SkipProperty, SkippedCyclesChangeNoDecisionUnderBacklog) {
  const int scenarios = PropertyCases(300);
  Parking parking;
  CheckSkipping(RandomBacklogCase, scenarios, "backlog", &parking);
  // Parking is exercised: jobs left out behind strict-FIFO anchors, and anchors placed with jobs
  // parked behind them (the cycle run again).
  EXPECT_GE(parking.runs, scenarios / 4);
  EXPECT_GT(parking.reruns, 0);
  // And cycles that stop once none of the rest of the order can start.
  EXPECT_GT(parking.stopped_early, 0);
}

TEST(SkipProperty, SkippedCyclesChangeNoDecisionUnderLeastAttainedService) {
  CheckSkipping(RandomLasCase, PropertyCases(300), "las");
}

TEST(SkipProperty, SkippedCyclesChangeNoDecisionOnHeterogeneousGpus) {
  CheckSkipping(RandomHeterogeneousCase, PropertyCases(200), "heterogeneous");
}

}  // namespace
}  // namespace arbiter::sim
