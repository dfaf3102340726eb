// Cluster snapshots: a whole cluster at one moment in one YAML file (docs/snapshot.md). A
// snapshot is a cluster file (topology, scheduler, priority classes, queues with their current
// quotas, nodes), read by the cluster file's own reader, plus sections of its own: when it was
// taken, the nodes' states, the queues' fair-share usage, and the running jobs (with where they
// run, since when, their last checkpoint and evictions), the pending jobs and the jobs being
// evicted, each as a jobs file has it plus its id and times.
//
// The reader builds the ClusterState the snapshot was taken from, through the state's own calls
// (Create, Bind, RecordCheckpoint, RestoreEvictions, RestoreRecentUsage, SetCordoned,
// SetHealthy): what any reader of the state sees is what it saw when the snapshot was written.
// Its errors read `FILE:LINE:COL: field.path: problem`, as the other readers'.
#pragma once

#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "arbiter/model.h"
#include "arbiter/status.h"
#include "config/config.h"
#include "core/state/cluster_state.h"
#include "job/spec.h"

namespace arbiter::config {

// The format's version, `snapshot_version:` (a reader refuses another).
inline constexpr int kSnapshotVersion = 1;

// A node that is not schedulable and healthy (node_states:).
struct SnapshotNode {
  enum class State : std::uint8_t { kSchedulable, kCordoned, kDraining };
  std::string node;
  State state = State::kSchedulable;
  bool healthy = true;
  std::string reason;  // why it was cordoned or drained, as the operator said
};
const char* SnapshotNodeStateName(SnapshotNode::State state);  // "schedulable", ...

// A job of a snapshot: its spec as a jobs file has it (the current priority class), its id, and
// what its section adds.
struct SnapshotJob {
  JobId id = 0;
  job::JobSpec spec;
  std::vector<Millis> evictions;  // every eviction before now, oldest first
  // Its service as a least-attained-service order counts it (Job::attained, starved; pending:
  // service_time, when its waiting started to count). Written only when not zero.
  Millis attained = 0;
  Millis starved = 0;
  Millis service_time = -1;
  // Gavel's rounds: the time it has run on each GPU model (Job::time_on_model, by model name; the
  // models it has not run on are left out). Written in the service too.
  std::vector<std::pair<std::string, Millis>> time_on_model;
  // running:
  Millis start_time = -1;
  Millis last_checkpoint = -1;  // -1: none since it started
  job::StoredAllocation allocation;
  // pending:
  bool held = false;  // not scheduled until released
  // stopping (evicted, told to stop by then; then pending again):
  Millis stop_time = -1;
};

struct Snapshot {
  // The cluster and the scheduler's options as they were (quotas and cordons of the moment). The
  // `server:` section (tokens) is never written.
  ClusterConfig config;
  Millis taken_at = 0;
  // Times are written as UTC calendar times (ISO 8601, a live server's Unix milliseconds), or as
  // durations from the driver's epoch (a simulation's, a cluster file's jobs).
  bool calendar = false;
  std::vector<SnapshotNode> node_states;
  // Per queue, its decayed recent usage (ClusterState::recent_usage, GPU-milli-milliseconds) as
  // of taken_at: the fair-share factor's input. Written in GPU-seconds.
  std::map<std::string, double> queue_usage;
  // The service (GPU-ms) of the last finished jobs, oldest first: what a Gittins order learned
  // (ClusterState::finished_service).
  std::vector<Millis> finished_service;
  std::vector<SnapshotJob> running, pending, stopping;
};

// What a snapshot loads into: the state it was taken from, and the jobs a cycle at taken_at
// schedules (the pending ones, held ones left out), by id.
struct LoadedSnapshot {
  Snapshot snapshot;
  ClusterState state;
  std::vector<Job> pending;
};

// The snapshot of `state` at `taken_at`: its configuration `config` (the state's own, with the
// quotas of the moment), its nodes' cordons and health, its running jobs, and `pending` (their
// specs from the jobs themselves: job::ToSpec). Folds the usage up to `taken_at` into the state
// first (AccrueUsage), as a cycle at that time does, so that the snapshot's usage is the state's.
Snapshot MakeSnapshot(const ClusterConfig& config, ClusterState& state,
                      std::span<const Job> pending, Millis taken_at);

// The snapshot's YAML text (docs/snapshot.md).
std::string WriteSnapshot(const Snapshot& snapshot);

// Reads a snapshot and builds its state; `file_name` prefixes every error.
Result<LoadedSnapshot> ParseSnapshot(std::string_view yaml, const std::string& file_name);
Result<LoadedSnapshot> LoadSnapshotFile(const std::string& path);

// A snapshot's time: `2026-05-01T10:00:00.250Z` (calendar) or a duration from the epoch (`2h`,
// `90500ms`).
std::string FormatSnapshotTime(Millis t, bool calendar);
// The reverse: an ISO 8601 UTC time (YYYY-MM-DDTHH:MM:SS[.fff]Z) in Unix milliseconds, or a
// duration from the epoch; `field` names the errors.
Result<Millis> ParseSnapshotTime(std::string_view text, std::string_view field);

}  // namespace arbiter::config
