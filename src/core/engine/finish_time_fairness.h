// Finish-time fairness (OrderPolicy kFinishTimeFairness, Themis's rho): the inputs of every job's
// rho that the whole cycle shares (the queues with work, the cluster's GPUs, the work assumed for
// a job without an estimate), taken once from the state and the pending jobs as they came in, so
// that the order (order.cc) and the victim search (preempt.cc) compare the same rhos.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "arbiter/engine.h"
#include "core/engine/lease_order.h"
#include "core/state/cluster_state.h"

namespace arbiter::engine {

class FinishTimeFairnessScope : public LeaseOrder {
 public:
  FinishTimeFairnessScope(const ClusterState& state, std::span<const Job> pending,
                          Millis default_runtime, Millis lease)
      : LeaseOrder(lease, Eviction::Kind::kFinishTimeFairness),
        cluster_milli_(static_cast<std::int64_t>(state.device_count()) * kMilliPerGpu),
        default_runtime_(default_runtime) {
    std::vector<bool> active(state.queue_count(), false);
    for (const Job& job : pending) {
      if (job.queue < active.size()) active[job.queue] = true;
    }
    for (const auto& [id, r] : state.running()) {
      if (r.job.queue < active.size()) active[r.job.queue] = true;
    }
    queues_ = static_cast<std::size_t>(std::count(active.begin(), active.end(), true));
  }

  // The rho of a waiting job at `now`.
  double Pending(const Job& job, Millis now) const {
    return FinishTimeFairness(job, now, WorkOf(job), queues_, cluster_milli_);
  }
  // (The same for every GPU model.)
  double Pending(const Job& job, Millis now, GpuTypeId /*type*/) const override {
    return Pending(job, now);
  }
  // The rho of a running job at `now`, as if it runs on to its end.
  double Running(const RunningJob& r, Millis now) const override {
    return RunningFinishTimeFairness(r.job, r.start_time, now, WorkOf(r.job), queues_,
                                     cluster_milli_);
  }

 private:
  Millis WorkOf(const Job& job) const {
    return job.runtime_estimate > 0 ? job.runtime_estimate : default_runtime_;
  }

  std::size_t queues_ = 0;
  std::int64_t cluster_milli_ = 0;
  Millis default_runtime_ = 0;
};

}  // namespace arbiter::engine
