// Between a job's names (JobSpec, StoredAllocation) and a ClusterState's ids (Job, Allocation).
#pragma once

#include <string>

#include "arbiter/model.h"
#include "arbiter/status.h"
#include "core/state/cluster_state.h"
#include "job/spec.h"

namespace arbiter::job {

// The engine's Job for a stored spec (priority class: `priority_class` when given, e.g. the
// status's current one). Errors name the field and list the known names, e.g.
// "queue: unknown leaf queue 'x' (known: batch, training)".
Result<Job> ToJob(JobId id, const JobSpec& spec, const ClusterState& state,
                  const std::string& priority_class = {});
// The spec of an engine Job (the reverse of ToJob, for jobs loaded from a file).
JobSpec ToSpec(const Job& job, const ClusterState& state);
Result<Allocation> ToAllocation(const StoredAllocation& allocation, const ClusterState& state);
StoredAllocation ToStoredAllocation(const Allocation& allocation, const ClusterState& state);

}  // namespace arbiter::job
