// The engine: the decision layer. One cycle takes the cluster state and the pending jobs and
// returns a Plan. It performs no I/O, reads no clock (time is passed in; a clock for stage timings
// may be injected) and draws no unseeded random number: the same inputs give the same plan.
#pragma once

#include <cstdint>
#include <functional>
#include <span>

#include "arbiter/model.h"
#include "arbiter/plan.h"
#include "arbiter/state.h"

namespace arbiter {

// Weights of the multifactor ordering key (as in Slurm's priority/multifactor). Each factor lies
// in [0, 1]; a job's key is the weighted sum, and jobs are taken in descending key order, ties by
// submit time then id.
struct OrderingWeights {
  double priority_class = 10000;  // class value / largest class value
  double queue_priority = 1000;   // queue priority / largest queue priority
  double fair_share = 2000;       // 2^(-recent usage share / target share) of the job's queue
  double age = 1000;              // waiting time / max_age, capped at 1
  Millis max_age = 7 * 24 * 3600 * kMillisPerSecond;
};

// Preemption and reclaim, and the guards that keep them from thrashing. The per-victim guards
// (minimum runtime, eviction budget, cooldown, grace period) belong to priority classes.
struct PreemptionOptions {
  bool enabled = true;
  // Cluster-wide cap on the GPUs evicted in one cycle, in milli-GPU; -1: no cap (as YARN's
  // total_preemption_per_round).
  std::int64_t max_gpus_per_cycle = -1;
  // Minimum benefit: do not evict when the victims would lose more than this much GPU-time (work
  // since their last checkpoint plus restart overhead, in GPU-milliseconds) per GPU the preemptor
  // gains; -1: no threshold.
  std::int64_t max_loss_per_gpu = -1;
  // Preemption searches per cycle (each is bounded; a cycle with thousands of blocked jobs tries
  // the first ones in order only).
  int max_attempts_per_cycle = 32;
};

// Backfill with reservations (as Slurm's sched/backfill): the first blocked jobs in order get a
// reservation computed from the running jobs' runtime estimates; later jobs may start ahead only
// if, by their own estimate, they end before the earliest reservation, or if they stay off every
// reserved device.
struct BackfillOptions {
  int reservations = 1;  // blocked jobs per cycle that get a reservation; 0 disables backfill
  // A running job past its estimate is assumed to end this long from now (re-evaluated every
  // cycle, so the reservation slides while the job overruns, and nothing new lands on the
  // reserved devices meanwhile).
  Millis overrun_grace = 5 * 60 * kMillisPerSecond;
  // Assumed runtime of a job without an estimate (running, or pending for backfill purposes).
  Millis default_runtime = 24 * 3600 * kMillisPerSecond;
  // Placement attempts when computing one reservation.
  int max_attempts = 64;
};

struct EngineOptions {
  OrderingWeights ordering;
  PreemptionOptions preemption;
  BackfillOptions backfill;
  // Candidate nodes scored per task once a feasible one is found in the best-fitting bucket.
  int score_candidates = 8;
  // Optional monotonic clock in microseconds, used only to time the stages of a cycle.
  std::function<std::int64_t()> clock_micros;
};

class Engine {
 public:
  explicit Engine(EngineOptions options = {}) : options_(std::move(options)) {}

  // One scheduling cycle. `state` serves as scratch space during the cycle and is returned
  // exactly as it was given; the driver applies the plan afterwards (ClusterState::Apply).
  Plan Schedule(ClusterState& state, std::span<const Job> pending, Millis now) const;

  const EngineOptions& options() const { return options_; }

 private:
  EngineOptions options_;
};

}  // namespace arbiter
