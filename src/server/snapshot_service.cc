// The cluster's snapshot (docs/snapshot.md): the state, the jobs and the operators' node states
// under one lock, written by the configuration's snapshot writer.
#include <fmt/format.h>

#include <algorithm>

#include "config/snapshot.h"
#include "server/core.h"

namespace arbiter::server {

Answer Core::Snapshot(const Caller& caller) {
  if (!caller.admin()) {
    return Status::PermissionDenied(
        fmt::format("{} may not take a snapshot of the cluster (admin)", caller.name));
  }
  std::lock_guard lock(mu_);
  DrainInboxLocked();
  const Millis now = Now();
  std::vector<Job> pending;
  for (const auto& [id, entry] : jobs_) {
    if (entry.stored.status.state == job::JobState::kPending) pending.push_back(entry.job);
  }
  config::Snapshot snapshot = config::MakeSnapshot(config_, *state_, pending, now);
  snapshot.calendar = true;
  // Jobs as submitted (what they run, their retries, their keys), under their current class.
  auto spec = [&](const Entry& entry) {
    job::JobSpec s = entry.stored.spec;
    s.priority_class = state_->priority_class(entry.job.priority_class).name;
    return s;
  };
  auto history = [&](JobId id) {
    const std::span<const Millis> times = state_->EvictionTimes(id);
    return std::vector<Millis>(times.begin(), times.end());
  };
  for (config::SnapshotJob& j : snapshot.running) j.spec = spec(jobs_.at(j.id));
  for (config::SnapshotJob& j : snapshot.pending) j.spec = spec(jobs_.at(j.id));
  for (const auto& [id, entry] : jobs_) {
    if (entry.stored.status.state != job::JobState::kHeld) continue;
    config::SnapshotJob j;
    j.id = id;
    j.spec = spec(entry);
    j.evictions = history(id);
    j.held = true;
    snapshot.pending.push_back(std::move(j));
  }
  std::sort(snapshot.pending.begin(), snapshot.pending.end(),
            [](const config::SnapshotJob& a, const config::SnapshotJob& b) { return a.id < b.id; });
  // Victims still stopping: pending again once stopped.
  for (const auto& [id, stop_at] : draining_) {
    config::SnapshotJob j;
    j.id = id;
    j.spec = spec(jobs_.at(id));
    j.evictions = history(id);
    j.stop_time = stop_at;
    snapshot.stopping.push_back(std::move(j));
  }
  // What the operators said of their nodes: cordoned or drained, and why.
  for (const auto& entry : nodes_admin_) {
    const std::string& name = entry.first;
    const store::NodeAdmin& admin = entry.second;
    auto it = std::find_if(snapshot.node_states.begin(), snapshot.node_states.end(),
                           [&](const config::SnapshotNode& n) { return n.node == name; });
    if (it == snapshot.node_states.end()) {
      std::optional<NodeId> node = state_->FindNode(name);
      if (!node) continue;
      snapshot.node_states.push_back(
          {name, config::SnapshotNode::State::kSchedulable, state_->node(*node).healthy, {}});
      it = snapshot.node_states.end() - 1;
    }
    it->state = admin.state == store::NodeAdminState::kDraining
                    ? config::SnapshotNode::State::kDraining
                : admin.state == store::NodeAdminState::kCordoned
                    ? config::SnapshotNode::State::kCordoned
                    : config::SnapshotNode::State::kSchedulable;
    it->reason = admin.reason;
  }
  return Answer(nlohmann::json(config::WriteSnapshot(snapshot)));
}

}  // namespace arbiter::server
