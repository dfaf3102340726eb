// The orders that hand GPUs out in leases (OrderPolicy kFinishTimeFairness, Themis's leases;
// kGavel, Gavel's rounds): each job has a standing, higher first, that the order and the victim
// search read alike. A waiting job may evict running work of its queue's tree that has run a whole
// lease since its start and whose standing, as it runs on, is below the waiting job's for the
// GPUs it would take (preempt.cc).
#pragma once

#include "arbiter/engine.h"
#include "arbiter/plan.h"
#include "core/state/cluster_state.h"

namespace arbiter::engine {

class LeaseOrder {
 public:
  LeaseOrder(Millis lease, Eviction::Kind kind) : lease_(lease), kind_(kind) {}
  virtual ~LeaseOrder() = default;
  LeaseOrder(const LeaseOrder&) = default;
  LeaseOrder& operator=(const LeaseOrder&) = default;

  // The standing of a waiting job at `now` for GPUs of model `type`.
  virtual double Pending(const Job& job, Millis now, GpuTypeId type) const = 0;
  // The standing of a running job at `now`, as if it runs on.
  virtual double Running(const RunningJob& r, Millis now) const = 0;

  // How long a job runs, from its start, before a job of higher standing may evict it.
  Millis lease() const { return lease_; }
  // What such an eviction is called.
  Eviction::Kind kind() const { return kind_; }

 private:
  Millis lease_;
  Eviction::Kind kind_;
};

}  // namespace arbiter::engine
