// What a driver (the simulator, the server) does for the orders that read a job's service
// (OrderPolicy kLas, kLas2d, kGittins): one call at each start and one at each completion, so
// that both drivers keep the engine's inputs alike.
#pragma once

#include <cstdint>
#include <vector>

#include "arbiter/engine.h"
#include "arbiter/state.h"

namespace arbiter {

// A job a plan starts, which starts to run at `now` (the plan's time, or its bind's start_after
// when it waits for its victims to stop): stores in it the service its order counts from then on
// (ServiceAtStart, a starvation promotion applied; service_time = now). The engine adds the time
// it runs from then on itself.
void BeginService(Job& job, Millis now, const OrderingWeights& w);

// The service a job gains by running `ran` ms on GPU model `type` (ServiceRate): a driver adds it
// to Job::attained when the job stops running and goes back to pending.
Millis ServiceOfRun(const ClusterState& state, const Job& job, GpuTypeId type, Millis ran,
                    const OrderingWeights& w);

// A job that stops running (to pending, or at its end) after `ran` ms on GPU model `type`: adds
// the run to Job::time_on_model, which Gavel's rounds read (nothing for kNone or no time).
void AddTimeOnModel(std::vector<Millis>& time_on_model, GpuTypeId type, Millis ran);

// A job that completed after running `ran` ms in all (over all its runs) on `milli` GPUs: under a
// Gittins order, the state learns its size (ClusterState::RecordFinishedService, the last
// `gittins_window` jobs); under the other orders, nothing.
void RecordCompletion(ClusterState& state, const OrderingWeights& w, Millis ran,
                      std::int64_t milli);

}  // namespace arbiter
