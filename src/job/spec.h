// The job as submitted: its spec (by names: queue, priority class, GPU types, topology levels),
// its lifecycle states, where it runs (by node name), and the checks of what a job may ask for
// (src/job/limits.h). Every reader of jobs builds a JobSpec and validates it here: jobs files and
// `arbiter submit -f` (YAML, src/config), the server's API and the store's records (JSON and
// binary, src/store), snapshots and scenarios. job::ToJob (src/job/resolve.h) turns it into the
// engine's Job against a cluster's state.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "arbiter/model.h"
#include "arbiter/plan.h"
#include "arbiter/status.h"

namespace arbiter::job {

enum class JobState : std::uint8_t {
  kPending,    // waiting to be placed (submitted, released, evicted or requeued)
  kHeld,       // pending, but not to be scheduled until released
  kRunning,    // bound to its allocation (from the bind on, also while victims stop)
  kCompleted,  // finished
  kFailed,
  kCancelled,
};
const char* JobStateName(JobState state);  // "pending", "held", "running", ...
std::optional<JobState> ParseJobState(std::string_view name);
inline bool IsFinished(JobState s) { return s >= JobState::kCompleted; }

// An affinity term with its level by name (AffinityTerm has a level index).
struct AffinitySpec {
  Labels match;
  std::string level = "node";
  bool anti = false;
  bool required = true;
};

// A job as submitted. Quantities are integers in the model's units (TaskRequest: milli-GPU, MiB
// of GPU memory per device, milli-CPU, MiB); times are milliseconds of the server's clock.
struct JobSpec {
  std::string name;
  std::string user;                    // the submitter, as authenticated (not the client's claim)
  std::string queue;                   // a leaf queue
  std::string priority_class;          // as submitted; JobStatus::priority_class is the current one
  std::vector<TaskGroup> groups;       // a gang; at least one group
  std::vector<std::string> gpu_types;  // acceptable GPU models; empty: any
  std::string topology_level;          // keep all tasks in one domain of this level; empty: none
  ConstraintMode topology_mode = ConstraintMode::kRequired;  // with topology_level
  Labels node_selector;
  std::vector<Toleration> tolerations;
  Labels labels;
  std::vector<AffinitySpec> affinity;
  Millis submit_time = 0;
  Millis runtime_estimate = 0;     // 0: unknown
  Millis checkpoint_interval = 0;  // 0: never checkpoints
  Millis restart_overhead = 0;
  // What each task runs, for the node agents: `argv` (exec form: the program and its
  // arguments, no shell) or `command` (shell form: one text run by /bin/sh -c), not both.
  std::vector<std::string> argv;
  std::string command;
  std::map<std::string, std::string> env;  // set in each task's environment
  // How often a failed run (a task exiting non-zero, its node lost) starts again before the
  // job fails (Slurm's --requeue, Kubernetes' backoffLimit). 0: the first failure fails it.
  std::int32_t max_retries = 0;
  // Optional. A second submission with the same (user, idempotency_key) is not recorded again:
  // Submit returns the first job's id with `duplicate` set, so a client may retry safely.
  std::string idempotency_key;

  friend bool operator==(const JobSpec&, const JobSpec&);
};

// Whether `text` is well-formed UTF-8 (no overlong forms, surrogates or code points beyond
// U+10FFFF): JSON text must be, so every text a job or event carries is checked.
bool ValidUtf8(std::string_view text);
// `field: is not valid UTF-8` unless it is.
Status CheckUtf8(std::string_view field, std::string_view text);

// Who named the job. A name the API creates (a jobs file, a submission, a snapshot) is an
// object name (limits::CheckObjectName); a trace's row keeps the id another system gave it
// (Alibaba PAI's "job/task", a Slurm job name with spaces), checked as any name (CheckName).
enum class Naming : std::uint8_t { kCreated, kTrace };
// Checks a spec: every problem is `FIELD: problem`, e.g. `groups[0].tasks: must be at least 1,
// got 0`. Names are not resolved (ToJob does that against a ClusterState).
Status ValidateJobSpec(const JobSpec& spec, Naming naming = Naming::kCreated);

// Where a job runs, by node name. The devices are indices into the node's devices.
struct StoredTask {
  std::uint32_t group = 0;
  std::uint32_t index = 0;
  std::string node;
  MilliCpu cpu{0};
  MemMiB memory{0};
  std::vector<DeviceShare> devices;
};
struct StoredAllocation {
  std::string gpu_type;  // empty for a job without GPUs
  std::vector<StoredTask> tasks;

  bool empty() const { return tasks.empty(); }
  friend bool operator==(const StoredAllocation&, const StoredAllocation&);
};

}  // namespace arbiter::job
