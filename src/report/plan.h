// One scheduling cycle's plan as JSON: what `arbiter plan --json` prints and the Python module
// returns.
#pragma once

#include <span>
#include <string>

#include "arbiter/model.h"
#include "arbiter/plan.h"
#include "core/state/cluster_state.h"

namespace arbiter::report {

// {"now_ms": N, "binds": [{"job", "name", "gpu_type", "tasks": [{"group", "index", "node",
// "devices": [{"device", "milli_gpu"}]}]}], "unplaced": [{"job", "name", "stage", "cause",
// "verdict", "nodes_total", "node_counts": {CAUSE: N}, "detail", "message"}]}. `jobs` are the
// pending jobs the plan was made for; the reasons' times are written as `style`.
std::string PlanJson(const ClusterState& state, std::span<const Job> jobs, const Plan& plan,
                     TimeStyle style);

}  // namespace arbiter::report
