// Gavel's allocation and rounds (OrderPolicy kGavel; Narayanan et al., "Heterogeneity-Aware
// Cluster Scheduling Policies for Deep Learning Workloads", OSDI 2020).
//
// The allocation: for every active job (pending or running, with GPUs), the share of its time it
// should spend on each GPU model it accepts, X, from a linear program on the normalised
// throughput matrix (ClusterState::NormalizedThroughput):
//   - kMaxMinFairness: maximise the least normalised effective throughput sum_m T(j,m) X(j,m) of
//     any job (Gavel's heterogeneity-aware LAS), then, at a thousandth of the weight, their sum;
//   - kMaxThroughput: maximise their sum;
// subject to sum_m X(j,m) <= 1 for each job and sum_j gpus(j) X(j,m) <= the GPUs of model m.
// Jobs of the same GPUs, accepted models and throughput row are interchangeable, so the program
// has one set of variables per such class (an optimum shared alike by a class's jobs exists, the
// program being convex and symmetric in them): tens of variables where Gavel's has one per job.
//
// The rounds: a job's priority on model m is X(j,m) over the share of its time since its
// submission it has run on m (Gavel's "allocation over rounds received"); one that has not run
// there has the highest, by X. The waiting job of highest priority goes first, on its model of
// highest priority; a running job whose priority on its model falls below a waiting job's there
// may be evicted once it has run a round (LeaseOrder).
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "arbiter/engine.h"
#include "core/engine/lease_order.h"
#include "core/state/cluster_state.h"

namespace arbiter::engine {

class GavelScope : public LeaseOrder {
 public:
  // From the state as it came in (its running jobs) and the pending jobs.
  GavelScope(const ClusterState& state, std::span<const Job> pending, const OrderingWeights& w);

  // The share of its time the allocation gives `job` on model `type` (0 for a job that was not
  // active when the scope was made, or a model it does not accept).
  double Share(const Job& job, GpuTypeId type) const;

  // Gavel's priority of a waiting job on `type` at `now`.
  double Pending(const Job& job, Millis now, GpuTypeId type) const override;
  // The priority of a running job on its model, counting its current run.
  double Running(const RunningJob& r, Millis now) const override;

  // A waiting job's highest priority over the models it accepts, and that model; priority 0 and
  // kNone when the allocation gives it no share anywhere.
  struct Best {
    double priority = 0;
    GpuTypeId type = kNone;
  };
  Best BestOf(const Job& job, Millis now) const;

 private:
  double Priority(const Job& job, GpuTypeId type, Millis ran_there, Millis now) const;
  const double* SharesOf(JobId id) const;

  std::size_t types_ = 0;
  std::vector<double> shares_;                      // per class, `types_` long
  std::unordered_map<JobId, std::uint32_t> class_;  // the class of each active job
};

}  // namespace arbiter::engine
