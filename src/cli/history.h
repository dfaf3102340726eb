// Recorded history for `arbiter whatif` (docs/whatif.md): what a server ran, replayed in the
// simulator. A history file (`arbiter history -o FILE`) is JSON: the server's snapshot (its
// configuration and nodes) and every job the server still lists (GET /v1/jobs: the active ones
// and the last 10,000 finished), each with its spec and its recorded times.
//
// The replay starts from an empty cluster at the window's start: the jobs submitted in the window
// arrive at their submit times and run for the time they were seen to run (completion - start);
// those still running or pending when the history was taken run for their runtime estimate.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "arbiter/engine.h"
#include "arbiter/model.h"
#include "arbiter/status.h"
#include "config/snapshot.h"
#include "core/state/cluster_state.h"
#include "sim/sim.h"
#include "store/store.h"

namespace arbiter::cli {

inline constexpr int kHistoryVersion = 1;

struct History {
  Millis taken_at = 0;        // when it was written (Unix ms)
  std::string snapshot_text;  // the snapshot's YAML (docs/snapshot.md), as the server wrote it
  config::Snapshot snapshot;  // read
  std::vector<store::StoredJob> jobs;  // by id
};

// {"history_version": 1, "taken_at_ms": T, "snapshot": "<YAML>", "jobs": [GET /v1/jobs/ID ...]}
std::string WriteHistory(const History& history);
Result<History> ParseHistory(std::string_view text, const std::string& file_name);
Result<History> LoadHistoryFile(const std::string& path);

// The window replayed: jobs submitted in [since, until), Unix ms. Time 0 of the replay is since.
struct ReplayWindow {
  Millis since = 0;
  Millis until = 0;
};
// The earliest submit time of the history's jobs (its taken_at when it has none) to taken_at.
ReplayWindow WholeHistory(const History& history);

// A job of the replay, by the workload's index (the simulator's job id - 1).
struct ReplayJob {
  JobId id = 0;                // the server's
  Millis recorded_start = -1;  // its first start, relative to the window's start; -1: never
  bool observed = false;       // its work is its observed running time (not an estimate)
};

struct Replay {
  sim::Workload workload;
  std::vector<ReplayJob> jobs;  // parallel to workload.jobs
  // Jobs of the window left out: held ones, and cancelled or failed ones that never ran.
  std::size_t left_out = 0;
};

// The replay of the window's jobs under the configuration whose state is `state` (the recorded
// one, or a proposed one with the same nodes): each job resolved against it, as submitted with
// its current priority class. Fails naming the job when one does not resolve (a queue or class
// the configuration lacks).
Result<Replay> BuildReplay(const History& history, const ReplayWindow& window,
                           const ClusterState& state, const EngineOptions& engine);

}  // namespace arbiter::cli
