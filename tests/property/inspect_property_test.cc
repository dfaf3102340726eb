// `sim::Inspect` (what `arbiter explain --scenario S --at T JOB` prints) predicts what the run
// really does: over random small simulations where preemption's per-cycle cap binds, for a job
// pending at T, Inspect's decision (placed or not, its nodes, victims and start, or the reason
// text, and the cycle's time) is the one the uninterrupted run made for that job at its first
// cycle at or after T, as `SimOptions::on_cycle` saw it. Seeded and deterministic.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "sim/sim.h"
#include "testing/builders.h"
#include "testing/random.h"

namespace arbiter::sim {
namespace {

constexpr Millis kSecond = kMillisPerSecond;
constexpr Millis kMinute = 60 * kSecond;
constexpr Millis kHour = 60 * kMinute;

using testing::Random;

using Case = testing::SimCase;

// A few nodes of 2 to 8 GPUs; 2 or 3 queues under one root, with quotas and borrowing; 3 classes
// with preemption; a small per-cycle eviction cap; 30 to 80 jobs over the first hour.
Case RandomCase(Random& rnd) {
  Case c;
  c.cluster = testing::Cluster();
  const int nodes = static_cast<int>(rnd.In(2, 4));
  for (int n = 0; n < nodes; ++n) {
    testing::Add(c.cluster, testing::Nodes("n" + std::to_string(n), 1, "H800",
                                           static_cast<int>(rnd.Of<std::int64_t>({2, 4, 8}))));
  }
  c.cluster.queues = {testing::Queue("org")};
  const int queues = static_cast<int>(rnd.In(2, 3));
  for (int q = 0; q < queues; ++q) {
    QueueSpec spec = testing::Queue("q" + std::to_string(q), "org");
    spec.priority = static_cast<std::int32_t>(rnd.In(0, 2));
    spec.preempt_lower_priority = rnd.Chance(30);
    spec.preemptable = rnd.Chance(85);
    if (rnd.Chance(75)) {
      QuotaSpec quota;
      quota.nominal = MilliGpu(rnd.In(1, 8) * kMilliPerGpu);
      if (rnd.Chance(50)) quota.borrowing_limit = MilliGpu(rnd.In(0, 6) * kMilliPerGpu);
      if (rnd.Chance(20)) quota.max = MilliGpu(rnd.In(4, 16) * kMilliPerGpu);
      spec.quota[kAllGpusResource] = quota;
    }
    c.cluster.queues.push_back(spec);
  }
  for (PriorityClassSpec& pc : c.cluster.priority_classes) {
    pc.min_runtime = rnd.Of<Millis>({0, 0, 2 * kMinute, 10 * kMinute});
    pc.grace_period = rnd.Of<Millis>({0, 10 * kSecond, 30 * kSecond, 90 * kSecond});
    pc.max_evictions = static_cast<std::int32_t>(rnd.In(0, 3));
    pc.eviction_window = kHour;
    pc.eviction_cooldown = rnd.Of<Millis>({0, 0, 5 * kMinute});
  }
  c.cluster.priority_classes[2].preemptible = true;
  c.engine.preemption.enabled = true;
  c.engine.preemption.max_gpus_per_cycle = rnd.In(1, 4) * kMilliPerGpu;
  c.engine.preemption.max_attempts_per_cycle = static_cast<int>(rnd.Of<std::int64_t>({1, 2, 32}));
  c.engine.backfill.reservations = static_cast<int>(rnd.In(0, 2));

  const int jobs = static_cast<int>(rnd.In(30, 80));
  for (int j = 0; j < jobs; ++j) {
    SimJob job;
    const std::int64_t gpus = rnd.Of<std::int64_t>({1, 1, 2, 2, 4, 8});
    job.job = testing::RandomGpuJob(rnd, j, gpus, 20, queues);
    // Bursts: a third of the jobs arrive on a few shared instants.
    job.job.submit_time = rnd.Chance(33) ? rnd.In(0, 6) * 10 * kMinute : rnd.In(0, kHour);
    job.work = rnd.In(1, 40) * kMinute + rnd.In(0, 999);
    if (rnd.Chance(50)) job.job.runtime_estimate = job.work + rnd.In(0, 10) * kMinute;
    if (rnd.Chance(40)) {
      job.kind = WorkKind::kTraining;
      job.job.checkpoint_interval = rnd.Of<Millis>({5 * kMinute, 10 * kMinute});
      job.checkpoint_cost = rnd.Of<Millis>({0, 20 * kSecond});
      job.job.restart_overhead = rnd.Of<Millis>({0, kMinute});
    }
    job.workload = "random";
    c.workload.jobs.push_back(std::move(job));
  }
  c.options.horizon = 2 * kHour;
  c.options.check_invariants = true;
  c.options.cycle_period = rnd.Of<Millis>({30 * kSecond, 30 * kSecond, 45 * kSecond});
  c.options.min_cycle_interval = rnd.Of<Millis>({kSecond, 5 * kSecond});
  c.options.sample_interval = 0;
  return c;
}

// What one cycle decided for one pending job.
struct Decision {
  Millis at = -1;
  bool placed = false;
  Millis start = -1;
  std::vector<std::string> nodes;
  std::vector<std::string> victims;
  std::string reason;  // not placed: Reason::Describe
  // Not compared: the cycle evicted jobs (for others), so its eviction budget may be spent.
  bool cycle_evicted = false;
};

std::string Show(const Decision& d) {
  std::string out = "cycle at " + FormatDuration(d.at) + ": ";
  if (!d.placed) return out + "not placed: " + d.reason;
  out += "placed on";
  for (const std::string& n : d.nodes) out += " " + n;
  out += ", starts at " + FormatDuration(d.start);
  if (!d.victims.empty()) out += ", evicting";
  for (const std::string& v : d.victims) out += " " + v;
  return out;
}

Decision FromInspect(const JobStatusAt& s) {
  Decision d;
  d.at = s.cycle_at;
  d.placed = s.placed;
  if (s.placed) {
    d.start = s.until;
    d.nodes = s.nodes;
    d.victims = s.victims;
  } else if (s.reason) {
    d.reason = s.reason->Describe();
  }
  return d;
}

// A job's history in the run, in order: the cycles that saw it pending and its evictions (it is
// pending again from the victim's stop).
struct Step {
  std::optional<Decision> cycle;
  Millis requeued_at = -1;
};

// (job, T) with the job pending at T (after every event at T), and what the run decided for it
// at its first cycle at or after T (none: no cycle before the horizon).
struct Probe {
  std::string job;
  Millis at = 0;
  std::optional<Decision> expected;
};

std::vector<Probe> Probes(const Case& c, const std::map<std::string, std::vector<Step>>& history,
                          Random& rnd, int count) {
  // Every interval of T that leads to the same expected decision.
  struct Range {
    std::string job;
    Millis lo, hi;
    std::optional<Decision> expected;
  };
  std::vector<Range> ranges;
  for (const SimJob& j : c.workload.jobs) {
    auto it = history.find(j.job.name);
    Millis lo = j.job.submit_time;
    bool pending = true;
    if (it != history.end()) {
      for (const Step& s : it->second) {
        if (!s.cycle) {
          lo = s.requeued_at;
          pending = true;
          continue;
        }
        const Decision& d = *s.cycle;
        // A cycle that places the job leaves it running at its own time.
        const Millis hi = d.placed ? d.at - 1 : d.at;
        if (lo <= hi) ranges.push_back({j.job.name, lo, hi, d});
        lo = d.at + 1;
        pending = !d.placed;
      }
    }
    if (pending && lo <= c.options.horizon)
      ranges.push_back({j.job.name, lo, c.options.horizon, std::nullopt});
  }
  // Most ranges lead to a cycle that leaves the job waiting: draw from each kind of decision in
  // turn (placed with victims, placed, not placed by a cycle that evicted for others, not placed
  // otherwise, no cycle), so that every kind is checked.
  constexpr std::size_t kKinds = 5;
  std::vector<std::vector<const Range*>> kinds(kKinds);
  for (const Range& r : ranges) {
    const std::size_t kind = !r.expected                   ? 4
                             : !r.expected->placed         ? (r.expected->cycle_evicted ? 2 : 3)
                             : r.expected->victims.empty() ? 1
                                                           : 0;
    kinds[kind].push_back(&r);
  }
  std::vector<Probe> out;
  for (int i = 0; i < count; ++i) {
    const std::vector<const Range*>* from = nullptr;
    for (std::size_t k = 0; k < kinds.size() && !from; ++k) {
      const std::vector<const Range*>& kind = kinds[(static_cast<std::size_t>(i) + k) % kKinds];
      if (!kind.empty()) from = &kind;
    }
    if (!from) break;
    const Range& r =
        *(*from)[static_cast<std::size_t>(rnd.In(0, static_cast<std::int64_t>(from->size()) - 1))];
    // The ends matter most: a cycle's own instant (the cycle at T itself: most often when it
    // evicted for others), an arrival's, the millisecond after a cycle.
    Millis t = 0;
    switch (r.expected && r.expected->cycle_evicted && !r.expected->placed
                ? (rnd.In(0, 3) == 0 ? 2 : 0)
                : rnd.In(0, 3)) {
      case 0:
        t = r.hi;
        break;
      case 1:
        t = r.lo;
        break;
      default:
        t = rnd.In(r.lo, r.hi);
    }
    out.push_back({r.job, t, r.expected});
  }
  return out;
}

TEST(InspectProperty, PredictsTheRunsNextCycle) {
  const int scenarios = testing::PropertyCases(50);
  constexpr int kProbesPerScenario = 16;
  int checked = 0, placed = 0, not_placed = 0, with_victims = 0, at_cycle = 0, none = 0;
  for (int seed = 1; seed <= scenarios; ++seed) {
    Random rnd(static_cast<std::uint64_t>(seed) * 0x9e3779b97f4a7c15ULL);
    const Case c = RandomCase(rnd);
    std::map<std::string, std::vector<Step>> history;
    SimOptions options = c.options;
    options.skip_unchanged_cycles = false;  // every cycle, as Inspect sees them
    options.on_cycle = [&](const Plan& plan, std::span<const Job> pending,
                           const ClusterState& state) {
      std::map<JobId, std::string> names;
      for (const Job& j : pending) names[j.id] = j.name;
      for (const Eviction& e : plan.evictions) {
        const RunningJob* victim = state.FindRunning(e.job);
        ASSERT_NE(victim, nullptr);
        history[victim->job.name].push_back({std::nullopt, e.stop_at});
      }
      for (std::size_t i = 0; i < pending.size(); ++i) {
        Decision d;
        d.at = plan.now;
        d.cycle_evicted = !plan.evictions.empty();
        for (const Unplaced& u : plan.unplaced) {
          if (u.pending_index == i) d.reason = u.reason.Describe();
        }
        for (const Bind& b : plan.binds) {
          if (b.pending_index != i) continue;
          d.placed = true;
          d.start = std::max(plan.now, b.start_after);
          for (const TaskAllocation& t : b.allocation.tasks) d.nodes.push_back(state.Describe(t));
          for (const Eviction& e : plan.evictions) {
            if (e.preemptor == pending[i].id)
              d.victims.push_back(state.FindRunning(e.job)->job.name);
          }
        }
        history[pending[i].name].push_back({d, -1});
      }
    };
    Result<RunResult> run = Simulate(c.cluster, c.engine, c.workload, options, "run");
    ASSERT_TRUE(run.ok()) << run.status().message();

    for (const Probe& p : Probes(c, history, rnd, kProbesPerScenario)) {
      Result<JobStatusAt> s = Inspect(c.cluster, c.engine, c.workload, c.options, p.job, p.at);
      ASSERT_TRUE(s.ok()) << s.status().message();
      const std::string where =
          "seed " + std::to_string(seed) + ", " + p.job + " at " + FormatDuration(p.at) + ": ";
      ASSERT_EQ(s->state, JobStatusAt::State::kPending) << where << "not pending";
      ++checked;
      if (!p.expected) {
        ++none;
        EXPECT_EQ(s->cycle_at, -1) << where << "the run makes no cycle before its horizon";
        continue;
      }
      const Decision got = FromInspect(*s);
      EXPECT_EQ(Show(got), Show(*p.expected)) << where;
      if (Show(got) != Show(*p.expected)) continue;
      placed += p.expected->placed;
      not_placed += !p.expected->placed;
      with_victims += !p.expected->victims.empty();
      at_cycle += p.at == p.expected->at;
    }
  }
  // The probes reach every kind of decision.
  EXPECT_EQ(checked, scenarios * kProbesPerScenario);
  EXPECT_GT(placed, checked / 40);
  EXPECT_GT(not_placed, checked / 40);
  EXPECT_GT(with_victims, checked / 160);
  EXPECT_GT(at_cycle, checked / 40);
  RecordProperty("probes", checked);
  RecordProperty("placed", placed);
  RecordProperty("not_placed", not_placed);
  RecordProperty("with_victims", with_victims);
  RecordProperty("at_a_cycle", at_cycle);
  RecordProperty("no_cycle", none);
  std::printf(
      "%d probes: %d placed (%d with victims), %d not placed, %d at a cycle's instant, %d "
      "with no cycle before the horizon\n",
      checked, placed, with_victims, not_placed, at_cycle, none);
}

}  // namespace
}  // namespace arbiter::sim
