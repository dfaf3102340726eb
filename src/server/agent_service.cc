// The server's side of the node agents (docs/design/agent.md): registration, the sync that
// carries the agents' reports in and their assignments out, node loss, and where logs are.
//
// The server is the authority on what runs where. An agent's sync reports every task it has
// (running or ended); the answer is the whole set the node is to run. The agent starts what it
// does not have, stops what the answer leaves out, and forgets an ended task once the answer no
// longer lists it. That one rule also fences: a task of a run the server has moved elsewhere
// (node lost, job requeued) is not in the answer, so its agent kills it when it comes back.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <limits>
#include <optional>
#include <set>

#include "server/core.h"
#include "store/codec.h"

namespace arbiter::server {
namespace {

using Json = nlohmann::json;
using job::JobState;
using store::Event;
using store::EventKind;
using Role = config::TokenSpec::Role;

// The flat rank of a task (group, index) of a spec: tasks of earlier groups come first.
std::uint32_t RankOf(const job::JobSpec& spec, std::uint32_t group, std::uint32_t index) {
  std::uint32_t rank = 0;
  for (std::uint32_t g = 0; g < group && g < spec.groups.size(); ++g)
    rank += static_cast<std::uint32_t>(spec.groups[g].count);
  return rank + index;
}

std::uint32_t TaskCount(const job::JobSpec& spec) {
  std::uint32_t n = 0;
  for (const TaskGroup& g : spec.groups) n += static_cast<std::uint32_t>(g.count);
  return n;
}

// A run's outcome in words, for the job's message.
std::string Ending(const TaskReport& r) {
  if (r.lost) return "was lost (its agent could not learn how it ended)";
  if (r.signal != 0) return fmt::format("was killed by signal {}", r.signal);
  return fmt::format("exited with code {}", r.exit_code);
}

bool Failed(const TaskReport& r) {
  return !r.running && (r.lost || r.signal != 0 || r.exit_code != 0);
}

// The devices configured for a node, as an agent would report them: model -> count.
std::map<std::string, int> ConfiguredDevices(const NodeSpec& spec) {
  std::map<std::string, int> out;
  for (const DeviceSpec& d : spec.devices) ++out[d.type];
  return out;
}

// Whether a reported model names a configured GPU type: the same, or the type is the model with
// a suffix ("A100" reported, "A100-80G" configured).
bool SameModel(const std::string& type, const std::string& model) {
  return type == model || (type.size() > model.size() &&
                           type.compare(0, model.size(), model) == 0 && type[model.size()] == '-');
}

}  // namespace

void Core::InitAgentsLocked(Millis now) {
  if (!agents()) return;
  // Every node waits for its agent. A node with jobs running on it (from the store) is given
  // twice the lost timeout from the server's start for its agent to notice the restart and
  // register again (as Kubernetes' node startup grace period), so that a slow restart does not
  // requeue a whole cluster's work.
  for (const NodeSpec& spec : config_.cluster.nodes) {
    AgentNode& a = agent_nodes_[spec.name];
    a.last_seen = now;
  }
  agents_grace_until_ = now + 2 * config_.server.node_lost_timeout;
  ApplyHealthLocked();
}

void Core::ApplyHealthLocked() {
  if (!agents() || !state_) return;
  for (NodeId n = 0; n < state_->node_count(); ++n) ApplyHealthLocked(state_->node(n).name);
}

void Core::ApplyHealthLocked(const std::string& node) {
  if (!agents() || !state_) return;
  const std::optional<NodeId> n = state_->FindNode(node);
  if (!n) return;
  auto it = agent_nodes_.find(node);
  const bool healthy = it != agent_nodes_.end() && it->second.registered && !it->second.lost;
  if (state_->node(*n).healthy != healthy) {
    Check(state_->SetHealthy(*n, healthy), "set a node's health");
  }
}

void Core::RecordNodeHealthLocked(EventKind kind, const std::string& node, Millis now,
                                  const std::string& actor, std::string message) {
  Event ev;
  ev.time = now;
  ev.kind = kind;
  ev.target = node;
  ev.actor = actor;
  ev.message = std::move(message);
  node_health_events_.push_back(std::move(ev));
}

void Core::FlushNodeHealthLocked() {
  if (node_health_events_.empty()) return;
  std::vector<Event> events;
  events.swap(node_health_events_);
  // Only the record of the changes: the nodes' health itself is the server's (memory), so a
  // store that refuses the events changes nothing else.
  const std::size_t n = events.size();
  if (Result<std::vector<Event>> written = store_->RecordNodeHealth(std::move(events));
      !written.ok()) {
    fmt::print(stderr, "error: the store refused {} node health event(s): {}\n", n,
               written.status().message());
  }
}

void Core::TouchNodesLocked(const job::StoredAllocation& allocation) {
  if (!agents()) return;
  for (const job::StoredTask& t : allocation.tasks) touched_nodes_.insert(t.node);
}

std::vector<std::function<void()>> Core::PublishAssignmentsLocked() {
  std::vector<std::function<void()>> wake;
  if (touched_nodes_.empty()) return wake;
  std::set<std::string> touched;
  touched.swap(touched_nodes_);
  for (const std::string& name : touched) {
    auto it = agent_nodes_.find(name);
    if (it == agent_nodes_.end()) continue;
    AgentNode& node = it->second;
    std::map<std::string, AgentNode::Task> now;
    for (Json& task : AssignmentsLocked(name)) {
      std::string key = task["key"].get<std::string>();
      now.emplace(std::move(key), AgentNode::Task{std::move(task), 0});
    }
    bool changed = false;
    for (auto& [key, task] : now) {
      auto old = node.tasks.find(key);
      if (old != node.tasks.end() && old->second.json == task.json) {
        task.revision = old->second.revision;
        continue;
      }
      task.revision = ++revision_;
      node.removed.erase(key);
      changed = true;
    }
    for (const auto& [key, task] : node.tasks) {
      if (now.count(key)) continue;
      node.removed[key] = ++revision_;
      changed = true;
    }
    node.tasks = std::move(now);
    if (changed && node.waiter) {
      wake.push_back(std::move(node.waiter));
      node.waiter = nullptr;
    }
  }
  return wake;
}

Json Core::ChangesLocked(AgentNode& node, const std::string& revision) {
  // "INCARNATION.N"; anything else (empty: a fresh agent) gets everything.
  std::uint64_t since = 0;
  bool known = false;
  const std::size_t dot = revision.find('.');
  if (dot != std::string::npos && revision.compare(0, dot, incarnation_) == 0) {
    const char* begin = revision.data() + dot + 1;
    const char* end = revision.data() + revision.size();
    auto [ptr, ec] = std::from_chars(begin, end, since);
    known = ec == std::errc() && ptr == end && since <= revision_ && since >= node.floor;
  }
  Json tasks = Json::array();
  Json removed = Json::array();
  for (const auto& [key, task] : node.tasks) {
    if (!known || task.revision > since) tasks.push_back(task.json);
  }
  if (known) {
    for (const auto& [key, at] : node.removed) {
      if (at > since) removed.push_back(key);
    }
    // What the agent has acknowledged by asking from `since` is forgotten: a later sync from
    // an earlier revision gets everything.
    std::erase_if(node.removed, [&](const auto& r) { return r.second <= since; });
    node.floor = std::max(node.floor, since);
  } else {
    node.removed.clear();
    node.floor = revision_;
  }
  return Json{{"revision", fmt::format("{}.{}", incarnation_, revision_)},
              {"full", !known},
              {"tasks", std::move(tasks)},
              {"removed", std::move(removed)},
              {"now_ms", Now()},
              {"epoch", options_.epoch}};
}

Answer Core::RegisterAgent(const Caller& caller, const std::string& node, const RegisterBody& body,
                           const std::string& peer) {
  if (caller.role != Role::kAgent)
    return Status::PermissionDenied(fmt::format("{} may not register nodes (agent)", caller.name));
  // A node's credential registers only its node; a join token only the nodes it names.
  if (!caller.node.empty() && caller.node != node) {
    return Status::PermissionDenied(
        fmt::format("the credential of node {} may not register node {}", caller.node, node),
        "node");
  }
  if (caller.node.empty() && !caller.MayJoinAs(node)) {
    return Status::PermissionDenied(
        fmt::format("the join token {} may not join as node {}", caller.name, node), "node");
  }
  if (!agents()) {
    return Status::Conflict(
        "the server runs its nodes itself (--virtual-nodes); agents are not "
        "taken",
        "node");
  }
  // The addresses an agent gives are its own: where the request came from.
  const std::string address = body.address.empty() ? peer : body.address;
  if (!AddressIsPeer(address, peer)) {
    return Status::PermissionDenied(
        fmt::format("'{}' is not the address this agent connects from ({})", address, peer),
        "address");
  }
  if (!body.log_url.empty() && UrlHost(body.log_url) != address &&
      !AddressIsPeer(UrlHost(body.log_url), peer)) {
    return Status::PermissionDenied(
        fmt::format("the log server must be at the agent's own address ({})", address), "log_url");
  }
  Changes lock(*this);
  auto it = agent_nodes_.find(node);
  const auto spec = std::find_if(config_.cluster.nodes.begin(), config_.cluster.nodes.end(),
                                 [&](const NodeSpec& s) { return s.name == node; });
  if (it == agent_nodes_.end() || spec == config_.cluster.nodes.end()) {
    return Status::NotFound(fmt::format("no node '{}' in the configuration (declare it under "
                                        "nodes: first)",
                                        node),
                            "node");
  }
  AgentNode& a = it->second;
  // A join token does not take a node from its live agent (which syncs with the node's
  // credential): it joins a node not yet registered, or one lost.
  if (caller.node.empty() && a.registered && !a.lost) {
    return Status::Conflict(
        fmt::format("node {} is registered by a live agent; an agent that already joined "
                    "registers again with its node credential",
                    node),
        "node");
  }
  // What it has must be what the configuration says it has, or the engine would place tasks on
  // devices that are not there (Slurm drains such a node; here the agent is refused and says so).
  std::map<std::string, int> reported;
  std::map<std::string, std::int64_t> memory;
  for (const ReportedDevice& d : body.devices) {
    ++reported[d.model];
    memory[d.model] = d.memory_mib;
  }
  std::vector<std::string> problems;
  const std::map<std::string, int> configured = ConfiguredDevices(*spec);
  for (const auto& [type, count] : configured) {
    int have = 0;
    for (const auto& [model, n] : reported) {
      if (SameModel(type, model)) have += n;
    }
    if (have < count) {
      problems.push_back(fmt::format("{} {} GPU(s) configured, {} found", count, type, have));
    }
  }
  for (const DeviceSpec& d : spec->devices) {
    for (const auto& [model, mib] : memory) {
      if (SameModel(d.type, model) && mib > 0 && mib < d.memory.value()) {
        problems.push_back(fmt::format("{}: {} MiB configured per GPU, {} MiB found", d.type,
                                       d.memory.value(), mib));
        break;
      }
    }
  }
  const std::int64_t cpu = body.cpu_milli;
  if (cpu > 0 && cpu < spec->cpu.value())
    problems.push_back(fmt::format("{} milli-CPU configured, {} found", spec->cpu.value(), cpu));
  const std::int64_t mem = body.memory_mib;
  if (mem > 0 && mem < spec->memory.value())
    problems.push_back(
        fmt::format("{} MiB of memory configured, {} found", spec->memory.value(), mem));
  problems.erase(std::unique(problems.begin(), problems.end()), problems.end());
  if (!problems.empty()) {
    std::string text;
    for (const std::string& p : problems) text += (text.empty() ? "" : "; ") + p;
    a.problem = "devices: " + text;
    return Status::Conflict(fmt::format("node {} does not have what the configuration says: "
                                        "{}",
                                        node, text),
                            "devices");
  }
  // Labels the agent reports join the node's, as kubelet's --node-labels do, so that node
  // selectors can use them; the configuration's win where both name a key.
  Labels labels;
  for (const NodeSpec& n : base_.cluster.nodes) {
    if (n.name == node) labels = n.labels;
  }
  for (const auto& [key, value] : body.labels) labels.emplace(key, value);
  if (labels != spec->labels) {
    config::ClusterConfig changed = config_;
    for (NodeSpec& n : changed.cluster.nodes) {
      if (n.name == node) n.labels = labels;
    }
    if (Status st = RebuildState(changed); !st.ok()) return st;
    config_ = std::move(changed);
  }
  const Millis now = Now();
  const bool was_ready = a.registered && !a.lost;
  a.problem.clear();
  a.registered = true;
  a.lost = false;
  a.last_seen = now;
  if (!was_ready) {
    RecordNodeHealthLocked(EventKind::kNodeReady, node, now, caller.name,
                           fmt::format("agent at {} with {} GPU(s)", address, body.devices.size()));
  }
  if (a.address != address) {
    // Its jobs' tasks elsewhere name it as their rendezvous (MASTER_ADDR): tell their nodes.
    if (const std::optional<NodeId> n = state_->FindNode(node)) {
      for (const Resident& r : state_->node(*n).residents) {
        if (const Entry* entry = FindLocked(r.job->job.id))
          TouchNodesLocked(entry->stored.status.allocation);
      }
    }
  }
  touched_nodes_.insert(node);
  a.address = address;
  a.log_url = body.log_url;
  Json devices = Json::array();
  for (const ReportedDevice& d : body.devices) {
    devices.push_back(Json{{"model", d.model},
                           {"name", d.name},
                           {"memory_mib", d.memory_mib},
                           {"uuid", d.uuid},
                           {"nvlink_group", d.nvlink_group}});
  }
  a.reported = Json{{"devices", std::move(devices)},
                    {"cpu_milli", cpu},
                    {"memory_mib", mem},
                    {"hostname", body.hostname}};
  ApplyHealthLocked(node);
  // Its silence is watched from now on.
  next_loss_check_ = std::min(
      next_loss_check_, std::max(now + config_.server.node_lost_timeout, agents_grace_until_));
  dirty_ = true;
  Wake();
  return Answer(Json{{"node", node},
                     {"sync_wait_ms", config_.server.agent_sync_wait},
                     {"node_lost_timeout_ms", config_.server.node_lost_timeout},
                     {"kill_after_ms", config_.server.kill_after},
                     {"checkpoint_root", config_.server.checkpoint_root},
                     {"epoch", options_.epoch}});
}

Core::SyncOutcome Core::SyncAgent(const Caller& caller, const std::string& node,
                                  const std::vector<TaskReport>& reports,
                                  const std::string& revision, std::function<void()> wake) {
  SyncOutcome out;
  if (caller.role != Role::kAgent) {
    out.answer =
        Status::PermissionDenied(fmt::format("{} may not sync nodes (agent)", caller.name));
    return out;
  }
  if (caller.node != node) {
    out.answer = Status::PermissionDenied(
        caller.node.empty()
            ? fmt::format("a join token only registers; sync with the credential node {}'s "
                          "registration returned",
                          node)
            : fmt::format("the credential of node {} may not sync node {}", caller.node, node),
        "node");
    return out;
  }
  // Syncs to wake once the lock is released: those of nodes the reports changed, and an
  // earlier sync of this node still waiting (answered now).
  std::vector<std::function<void()>> woken;
  {
    Changes lock(*this);
    DrainInboxLocked();
    auto it = agent_nodes_.find(node);
    if (it == agent_nodes_.end()) {
      out.answer = Status::NotFound(fmt::format("no node '{}'", node), "node");
      return out;
    }
    if (!it->second.registered || it->second.lost) {
      // The server restarted, or gave the node up: the agent registers again (its devices are
      // checked again) before it is given work.
      out.answer = Status::Conflict(fmt::format("{} is not registered{}; register first", node,
                                                it->second.lost ? " (it was lost)" : ""),
                                    "node");
      return out;
    }
    it->second.last_seen = Now();
    TakeReportsLocked(node, reports, Now());
    // The reports may have changed the node's tasks (a task ended): published first, so that
    // the answer has them.
    woken = PublishAssignmentsLocked();
    AgentNode& a = it->second;
    Json changes = ChangesLocked(a, revision);
    if (wake && !changes["full"].get<bool>() && changes["tasks"].empty() &&
        changes["removed"].empty()) {
      // Nothing new: the sync waits (no thread with it) until the node's tasks change. (A whole
      // set, even an empty one, is answered at once: the agent may hold tasks to drop.)
      if (a.waiter) woken.push_back(std::move(a.waiter));
      a.waiter = std::move(wake);
      a.waiter_ticket = out.ticket = next_ticket_++;
      out.waiting = true;
    } else {
      out.answer = Answer(std::move(changes));
    }
  }
  for (std::function<void()>& fn : woken) fn();
  return out;
}

Answer Core::AgentChanges(const std::string& node, const std::string& revision,
                          std::uint64_t ticket) {
  std::function<void()> dropped;  // a waiter that timed out: destroyed without the lock
  std::lock_guard lock(mu_);
  auto it = agent_nodes_.find(node);
  if (it == agent_nodes_.end()) return Status::NotFound(fmt::format("no node '{}'", node), "node");
  AgentNode& a = it->second;
  if (a.waiter_ticket == ticket) dropped.swap(a.waiter);
  if (!a.registered || a.lost)
    return Status::Conflict(fmt::format("{} is not registered; register first", node), "node");
  a.last_seen = Now();
  return Answer(ChangesLocked(a, revision));
}

void Core::TakeReportsLocked(const std::string& node, const std::vector<TaskReport>& reports,
                             Millis now) {
  std::vector<Event> events;
  std::set<JobId> touched;
  for (const TaskReport& r : reports) {
    auto found = jobs_.find(r.job);
    if (found == jobs_.end()) continue;
    Entry& entry = found->second;
    const store::JobStatus& status = entry.stored.status;
    // A report of an earlier run, or of a task the job does not have, changes nothing.
    if (status.state != JobState::kRunning || status.start_time != r.run) continue;
    const std::uint32_t tasks = TaskCount(entry.stored.spec);
    if (r.rank >= tasks) continue;
    bool on_node = false;
    for (const job::StoredTask& t : status.allocation.tasks) {
      if (t.node == node && RankOf(entry.stored.spec, t.group, t.index) == r.rank) on_node = true;
    }
    if (!on_node) continue;
    if (entry.reports.size() != tasks) entry.reports.assign(tasks, TaskReport{});
    TaskReport& kept = entry.reports[r.rank];
    const Millis checkpoint = std::max(kept.checkpoint, r.checkpoint);
    if (kept.job == 0 || kept.running) kept = r;  // an ended task stays ended
    kept.checkpoint = checkpoint;
    touched.insert(r.job);
  }
  for (JobId id : touched) {
    Entry& entry = jobs_.at(id);
    const store::JobStatus& status = entry.stored.status;
    // A checkpoint of any task is the job's (with torch, rank 0 writes it).
    Millis checkpoint = -1;
    for (const TaskReport& r : entry.reports) checkpoint = std::max(checkpoint, r.checkpoint);
    if (checkpoint > status.last_checkpoint && checkpoint >= status.start_time) {
      Event ev;
      ev.time = checkpoint;
      ev.kind = EventKind::kCheckpointed;
      ev.job = id;
      ev.actor = "agent:" + node;
      events.push_back(std::move(ev));
    }
    std::size_t ended = 0;
    const TaskReport* failed = nullptr;
    for (const TaskReport& r : entry.reports) {
      if (r.job == 0 || r.running) continue;
      ++ended;
      if (!failed && Failed(r)) failed = &r;
    }
    Event ev;
    ev.time = now;
    ev.job = id;
    ev.actor = "agent:" + node;
    if (draining_.count(id)) {
      // An evicted job is stopped once every task is gone, however it ended.
      if (ended < entry.reports.size()) continue;
      ev.kind = EventKind::kEvicted;
      ev.message = "stopped after the checkpoint signal";
    } else if (failed) {
      ev = FailRunLocked(entry, now, fmt::format("task {} {}", failed->rank, Ending(*failed)));
    } else if (ended == entry.reports.size()) {
      ev.kind = EventKind::kCompleted;
      ev.message = "every task exited with code 0";
    } else {
      continue;
    }
    events.push_back(std::move(ev));
  }
  if (events.empty()) return;
  std::vector<std::pair<JobId, Millis>> checkpoints;
  std::vector<JobId> stopped;
  for (const Event& ev : events) {
    if (ev.kind == EventKind::kCheckpointed) {
      checkpoints.emplace_back(ev.job, ev.time);
    } else {
      stopped.push_back(ev.job);
    }
  }
  if (Status st = AppendLocked(std::move(events)); !st.ok()) {
    fmt::print(stderr, "error: the store refused node {}'s reports: {}\n", node, st.message());
    return;
  }
  for (const auto& [id, at] : checkpoints) {
    Check(state_->RecordCheckpoint(id, at), "record a checkpoint");
  }
  for (JobId id : stopped) {
    if (draining_.erase(id) == 0) Check(state_->Unbind(id, now), "end a job");
  }
  dirty_ = true;
  Wake();
}

Event Core::FailRunLocked(const Entry& entry, Millis now, std::string why) {
  Event ev;
  ev.time = now;
  ev.job = entry.stored.id;
  ev.actor = "scheduler";
  const std::int32_t used = entry.stored.status.retries, allowed = entry.stored.spec.max_retries;
  if (used < allowed) {
    ev.kind = EventKind::kRetried;
    ev.message = fmt::format("{}; retry {} of {}", why, used + 1, allowed);
  } else {
    ev.kind = EventKind::kFailed;
    ev.message =
        allowed == 0 ? why : fmt::format("{}; no retry left (max_retries {})", why, allowed);
  }
  return ev;
}

Millis Core::LoseSilentNodesLocked(Millis now) {
  if (!agents()) return std::numeric_limits<Millis>::max();
  // No node can be lost before the earliest deadline of the last look (a sync only moves a
  // deadline later; a registration brings the look forward): no look at every node until then.
  if (now < next_loss_check_) return next_loss_check_;
  Millis next = std::numeric_limits<Millis>::max();
  const Millis timeout = config_.server.node_lost_timeout;
  std::vector<std::string> lost;
  for (auto& [name, a] : agent_nodes_) {
    if (a.lost) continue;
    const std::optional<NodeId> n = state_->FindNode(name);
    const bool has_jobs = n && !state_->node(*n).residents.empty();
    if (!a.registered && !has_jobs) continue;  // nothing to lose yet
    const Millis deadline = std::max(a.last_seen + timeout, agents_grace_until_);
    if (deadline <= now) {
      lost.push_back(name);
    } else {
      next = std::min(next, deadline);
    }
  }
  for (const std::string& name : lost) {
    AgentNode& a = agent_nodes_[name];
    a.lost = true;
    const std::string silence =
        fmt::format("no word from its agent for {}", FormatDuration(now - a.last_seen));
    fmt::print(stderr, "node {}: lost ({})\n", name, silence);
    RecordNodeHealthLocked(EventKind::kNodeLost, name, now, "scheduler", silence);
    const std::optional<NodeId> n = state_->FindNode(name);
    std::set<JobId> jobs;
    if (n) {
      for (const Resident& r : state_->node(*n).residents) jobs.insert(r.job->job.id);
    }
    for (const auto& [id, stop] : draining_) {
      for (const job::StoredTask& t : jobs_.at(id).stored.status.allocation.tasks) {
        if (t.node == name) jobs.insert(id);
      }
    }
    std::vector<Event> events;
    for (JobId id : jobs) {
      const Entry& entry = jobs_.at(id);
      if (draining_.count(id)) {
        Event ev;
        ev.time = now;
        ev.kind = EventKind::kEvicted;
        ev.job = id;
        ev.actor = "scheduler";
        ev.message = fmt::format("node {} lost while the job was stopping", name);
        events.push_back(std::move(ev));
      } else {
        events.push_back(FailRunLocked(entry, now, fmt::format("node {} lost", name)));
      }
    }
    if (!events.empty()) {
      if (Status st = AppendLocked(std::move(events)); !st.ok()) {
        fmt::print(stderr, "error: the store refused node {}'s loss: {}\n", name, st.message());
        continue;
      }
    }
    for (JobId id : jobs) {
      if (draining_.erase(id) == 0) Check(state_->Unbind(id, now), "end a lost node's job");
    }
  }
  for (const std::string& name : lost) ApplyHealthLocked(name);
  if (!lost.empty()) dirty_ = true;
  next_loss_check_ = next;
  return next;
}

Json Core::AssignmentsLocked(const std::string& node) const {
  Json out = Json::array();
  const std::optional<NodeId> n = state_->FindNode(node);
  if (!n) return out;
  // The jobs with a task here: those the state places here, and victims still stopping (the
  // state gave their devices to their preemptors already).
  std::vector<JobId> ids;
  for (const Resident& r : state_->node(*n).residents) ids.push_back(r.job->job.id);
  std::set<std::uint32_t> stopping_devices;  // devices of victims still stopping here
  bool stopping_cpu_only = false;
  for (const auto& [id, stop] : draining_) {
    const Entry& entry = jobs_.at(id);
    for (const job::StoredTask& t : entry.stored.status.allocation.tasks) {
      if (t.node != node) continue;
      ids.push_back(id);
      if (t.devices.empty()) stopping_cpu_only = true;
      for (const DeviceShare& d : t.devices) stopping_devices.insert(d.device);
    }
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  const std::string root = config_.server.checkpoint_root;
  for (JobId id : ids) {
    const Entry& entry = jobs_.at(id);
    const job::JobSpec& spec = entry.stored.spec;
    const store::JobStatus& status = entry.stored.status;
    const auto stop = draining_.find(id);
    const std::uint32_t world = TaskCount(spec);
    // Rank 0's node is the gang's rendezvous (MASTER_ADDR, as torch.distributed expects).
    std::string master = "127.0.0.1";
    for (const job::StoredTask& t : status.allocation.tasks) {
      if (RankOf(spec, t.group, t.index) != 0) continue;
      auto a = agent_nodes_.find(t.node);
      if (a != agent_nodes_.end() && !a->second.address.empty()) master = a->second.address;
    }
    std::uint32_t local = 0;
    for (const job::StoredTask& t : status.allocation.tasks) {
      if (t.node != node) continue;
      // A preemptor's task waits until the victims on its devices are gone.
      if (stop == draining_.end()) {
        bool blocked = stopping_cpu_only && t.devices.empty();
        for (const DeviceShare& d : t.devices)
          blocked = blocked || stopping_devices.count(d.device);
        if (blocked) continue;
      }
      const std::uint32_t rank = RankOf(spec, t.group, t.index);
      std::string visible;
      Json devices = Json::array();
      for (const DeviceShare& d : t.devices) {
        visible += (visible.empty() ? "" : ",") + std::to_string(d.device);
        devices.push_back(d.device);
      }
      Json env = Json::object();
      for (const auto& [k, v] : spec.env) env[k] = v;
      env["ARBITER_JOB_ID"] = std::to_string(id);
      env["ARBITER_JOB_NAME"] = spec.name;
      env["ARBITER_TASK_INDEX"] = std::to_string(rank);
      env["ARBITER_TASK_GROUP"] = t.group < spec.groups.size() ? spec.groups[t.group].name : "";
      env["ARBITER_NUM_TASKS"] = std::to_string(world);
      env["ARBITER_RUN"] = std::to_string(status.start_time);
      env["CUDA_VISIBLE_DEVICES"] = visible;
      env["WORLD_SIZE"] = std::to_string(world);
      env["RANK"] = std::to_string(rank);
      env["LOCAL_RANK"] = std::to_string(local++);
      env["MASTER_ADDR"] = master;
      // One port per job, so that two gangs with rank 0 on one node do not collide.
      env["MASTER_PORT"] = std::to_string(29500 + id % 10000);
      Json argv = Json::array();
      if (!spec.argv.empty()) {
        for (const std::string& a : spec.argv) argv.push_back(a);
      } else if (!spec.command.empty()) {
        argv = Json::array({"/bin/sh", "-c", spec.command});
      }
      Json task{{"key", fmt::format("{}.{}.{}", id, rank, status.start_time)},
                {"job", id},
                {"rank", rank},
                {"run", status.start_time},
                {"argv", std::move(argv)},
                {"env", std::move(env)},
                {"devices", std::move(devices)},
                {"checkpoint_dir",
                 root.empty() ? Json(nullptr) : Json(fmt::format("{}/job-{}", root, id))}};
      if (stop != draining_.end()) {
        const PriorityClassSpec* pc = nullptr;
        if (auto c = state_->FindPriorityClass(status.priority_class))
          pc = &state_->priority_class(*c);
        // The time to stop by, on the server's clock: the agent counts from the answer's now_ms
        // (the task's text stays the same while it waits to be sent).
        task["stop"] = Json{{"signal", pc ? pc->checkpoint_signal : std::string("SIGUSR1")},
                            {"term_at_ms", stop->second},
                            {"kill_after_ms", config_.server.kill_after}};
      }
      out.push_back(std::move(task));
    }
  }
  return out;
}

Answer Core::LogSource(JobId id, std::uint32_t rank) {
  std::lock_guard lock(mu_);
  Entry* entry = FindLocked(id);
  if (!entry)
    return Status::NotFound(fmt::format("no job {} in memory (its logs stay on its node)", id),
                            "job");
  const std::uint32_t tasks = TaskCount(entry->stored.spec);
  if (rank >= tasks) {
    return Status::InvalidArgument(
        fmt::format("job {} has {} task(s), 0 to {}", id, tasks, tasks - 1), "task");
  }
  std::string node;
  for (const job::StoredTask& t : entry->stored.status.allocation.tasks) {
    if (RankOf(entry->stored.spec, t.group, t.index) == rank) node = t.node;
  }
  if (node.empty() && rank < entry->last_nodes.size()) node = entry->last_nodes[rank];
  if (node.empty())
    return Status::NotFound(fmt::format("task {} of job {} has not run yet", rank, id), "task");
  auto a = agent_nodes_.find(node);
  if (a == agent_nodes_.end() || a->second.log_url.empty()) {
    return Status::NotFound(fmt::format("{} has no agent to ask for the log", node), "node");
  }
  return Answer(Json{
      {"node", node}, {"url", a->second.log_url}, {"path", fmt::format("/logs/{}/{}", id, rank)}});
}

}  // namespace arbiter::server
