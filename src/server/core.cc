#include "server/core.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <optional>
#include <span>
#include <thread>

#include "store/codec.h"
#include "store/names.h"

namespace arbiter::server {
namespace {

using Json = nlohmann::json;
using store::Event;
using store::EventKind;
using store::JobState;
using Role = config::TokenSpec::Role;

constexpr Millis kNeverDue = std::numeric_limits<Millis>::max();
// How often the queues' fair-share usage is saved (and at a clean stop): a crash loses at most
// this much of it, as Slurm's periodic state save does.
constexpr Millis kUsageSavePeriod = 60 * kMillisPerSecond;
// The id of the probe job a submission is checked with (never a stored id).
constexpr JobId kProbeId = std::numeric_limits<JobId>::max();

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string Join(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

Json MilliOrNull(std::int64_t v) { return v < 0 ? Json(nullptr) : Json(v); }

}  // namespace

Core::Core(config::ClusterConfig config, std::unique_ptr<store::Store> store, CoreOptions options)
    : options_(std::move(options)),
      base_(config),
      store_(std::move(store)),
      config_(std::move(config)),
      engine_(config_.engine),
      probe_engine_(config_.engine) {}

Core::~Core() {
  {
    std::lock_guard lock(inbox_mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (loop_.joinable()) loop_.join();
  std::lock_guard lock(mu_);
  if (state_) SaveUsageLocked(Now());
}

void Core::SaveUsageLocked(Millis now) {
  last_usage_save_ = now;
  state_->AccrueUsage(now);
  std::vector<store::QueueUsage> usage;
  for (QueueId q = 0; q < state_->queue_count(); ++q) {
    usage.push_back({state_->queue(q).spec.name, state_->recent_usage(q), now});
  }
  if (Status st = store_->SaveQueueUsage(std::move(usage)); !st.ok()) {
    fmt::print(stderr, "error: the store refused the queues' usage: {}\n", st.message());
  }
}

Result<std::unique_ptr<Core>> Core::Open(config::ClusterConfig config,
                                         std::unique_ptr<store::Store> store, CoreOptions options) {
  if (!options.now) {
    options.now = [] {
      return std::chrono::duration_cast<std::chrono::milliseconds>(
                 std::chrono::system_clock::now().time_since_epoch())
          .count();
    };
  }
  std::unique_ptr<Core> core(new Core(std::move(config), std::move(store), std::move(options)));
  {
    std::lock_guard lock(core->mu_);
    if (Status st = core->Recover(); !st.ok()) return st;
    core->InitAgentsLocked(core->Now());
  }
  core->loop_ = std::thread([c = core.get()] { c->Loop(); });
  return core;
}

Status Core::Recover() {
  // The jobs are resolved against the configured names (queues, classes, GPU types, levels),
  // which the stored quota overrides and node states do not change.
  Result<ClusterState> names = ClusterState::Create(config_.cluster);
  if (!names.ok()) return Status(names.status()).WithContext("configuration: ");
  // The store hands the jobs over a batch at a time while it reads the next. Each batch is
  // resolved and moved into entries by every processor, each into a map of its own (allocating
  // and filling a million entries is most of the work), whose nodes are then spliced into jobs_
  // without copying.
  const std::size_t parts = std::clamp<std::size_t>(std::thread::hardware_concurrency(), 1, 8);
  std::vector<std::map<JobId, Entry>> local(parts);
  std::vector<std::string> errors(parts);
  std::vector<std::size_t> failed(parts);
  std::unique_lock inbox(inbox_mu_);
  std::map<std::string, std::int64_t>::iterator user = active_.end();
  auto each_batch = [&](std::span<store::StoredJob> batch) -> Status {
    auto resolve = [&](std::size_t p) {
      for (std::size_t i = batch.size() * p / parts; i < batch.size() * (p + 1) / parts; ++i) {
        store::StoredJob& stored = batch[i];
        Result<Job> job =
            store::ToJob(stored.id, stored.spec, *names, stored.status.priority_class);
        if (!job.ok()) {
          errors[p] = job.status().message();
          failed[p] = i;
          return;
        }
        const JobId id = stored.id;
        const Millis run_start =
            stored.status.state == JobState::kRunning ? stored.status.start_time : -1;
        local[p].emplace_hint(local[p].end(), std::piecewise_construct, std::forward_as_tuple(id),
                              std::forward_as_tuple(std::move(stored), std::move(job).value(),
                                                    std::string(), false, Millis{-1}, run_start));
      }
    };
    if (parts == 1 || batch.size() < 1024) {
      for (std::size_t p = 0; p < parts; ++p) resolve(p);
    } else {
      std::vector<std::thread> threads;
      for (std::size_t p = 1; p < parts; ++p) threads.emplace_back(resolve, p);
      resolve(0);
      for (std::thread& t : threads) t.join();
    }
    for (std::size_t p = 0; p < parts; ++p) {
      if (!errors[p].empty()) {
        const store::StoredJob& stored = batch[failed[p]];
        return Status::Conflict(fmt::format(
            "store: job {} ({}) no longer fits the configuration: {}; restore the configuration "
            "it was accepted under",
            stored.id, stored.spec.name, errors[p]));
      }
      while (!local[p].empty()) {
        auto node = local[p].extract(local[p].begin());
        Entry& entry = node.mapped();
        if (entry.stored.status.state == JobState::kRunning) {
          RememberNodes(entry);
          if (entry.stored.status.stop_at >= 0)
            draining_[entry.stored.id] = entry.stored.status.stop_at;
        }
        // Most jobs come from few users: look the counter up only when the user changes.
        if (user == active_.end() || user->first != entry.stored.spec.user) {
          user = active_.try_emplace(entry.stored.spec.user, 0).first;
        }
        ++user->second;
        jobs_.insert(jobs_.end(), std::move(node));  // the store gives them by id
      }
    }
    return Status::Ok();
  };
  Result<store::Snapshot> snapshot =
      store_->Load({.include_finished = false, .each_batch = each_batch});
  if (!snapshot.ok()) return snapshot.status();
  inbox.unlock();
  const std::vector<store::QueueUsage> usage = std::move(snapshot->queue_usage);
  for (const store::QueueQuotaOverride& q : snapshot->queue_quotas) {
    auto it = std::find_if(config_.cluster.queues.begin(), config_.cluster.queues.end(),
                           [&](const QueueSpec& s) { return s.name == q.queue; });
    if (it == config_.cluster.queues.end()) {
      fmt::print(stderr,
                 "warning: the store changed the quota of queue '{}', which the "
                 "configuration no longer has; ignored\n",
                 q.queue);
      continue;
    }
    it->quota = q.quota;
  }
  for (const store::NodeAdmin& n : snapshot->nodes) {
    auto it = std::find_if(config_.cluster.nodes.begin(), config_.cluster.nodes.end(),
                           [&](const NodeSpec& s) { return s.name == n.node; });
    if (it == config_.cluster.nodes.end()) {
      fmt::print(stderr,
                 "warning: the store has node '{}' {}, which the configuration no "
                 "longer has; ignored\n",
                 n.node, store::NodeAdminStateName(n.state));
      continue;
    }
    // The API's last word, schedulable included: an uncordon overrides the configuration.
    it->cordoned = n.state != store::NodeAdminState::kSchedulable;
    if (n.state != store::NodeAdminState::kSchedulable) nodes_admin_[n.node] = n;
  }
  if (Status st = RebuildState(config_); !st.ok()) return st;
  // The queues' fair-share usage as last saved (decayed from then by the next cycle).
  for (const store::QueueUsage& u : usage) {
    if (std::optional<QueueId> q = state_->FindQueue(u.queue)) {
      state_->RestoreRecentUsage(*q, u.usage, u.time);
    }
  }
  last_usage_save_ = Now();
  return Status::Ok();
}

Status Core::RebuildState(const config::ClusterConfig& config) {
  Result<ClusterState> created = ClusterState::Create(config.cluster);
  if (!created.ok()) return Status(created.status()).WithContext("configuration: ");
  ClusterState& state = *created;
  for (auto& [id, entry] : jobs_) {
    if (!entry.stored.status.evictions.empty())
      state.RestoreEvictions(id, entry.stored.status.evictions);
    if (entry.stored.status.state != JobState::kRunning || draining_.count(id)) continue;
    Result<Allocation> allocation = store::ToAllocation(entry.stored.status.allocation, state);
    if (!allocation.ok()) {
      return Status::Conflict(
          fmt::format("store: job {} runs where the configuration has no room: {}", id,
                      allocation.status().message()));
    }
    if (Status st = state.Bind(entry.job, *allocation, entry.stored.status.start_time); !st.ok()) {
      return Status::Conflict(
          fmt::format("store: job {} cannot be placed back: {}", id, st.message()));
    }
    if (entry.stored.status.last_checkpoint >= 0) {
      // The job was just bound: it runs, so this cannot fail.
      if (Status st = state.RecordCheckpoint(id, entry.stored.status.last_checkpoint); !st.ok()) {
        return Status::Internal(fmt::format("job {}: {}", id, st.message()));
      }
    }
  }
  // The queues' recent usage (fair share) carries over to the new state.
  if (state_ && state_->last_accrual() >= 0) {
    for (QueueId q = 0; q < state_->queue_count(); ++q) {
      if (std::optional<QueueId> same = state.FindQueue(state_->queue(q).spec.name)) {
        state.RestoreRecentUsage(*same, state_->recent_usage(q), state_->last_accrual());
      }
    }
  }
  state_.emplace(std::move(state));
  ApplyHealthLocked();
  Result<ClusterState> probe = ClusterState::Create(config.cluster);
  if (!probe.ok()) return Status(probe.status()).WithContext("configuration: ");
  {
    std::lock_guard lock(probe_mu_);
    probe_.emplace(std::move(probe).value());
  }
  dirty_ = true;
  return Status::Ok();
}

void Core::Wake() {
  dirty_ = true;
  {
    std::lock_guard lock(inbox_mu_);
    wake_ = true;
  }
  cv_.notify_one();
}

void Core::DrainInboxLocked() {
  std::vector<Entry> accepted;
  {
    std::lock_guard lock(inbox_mu_);
    accepted.swap(inbox_);
  }
  if (accepted.empty()) return;
  for (Entry& entry : accepted) {
    const JobId id = entry.stored.id;
    jobs_.emplace(id, std::move(entry));
  }
  dirty_ = true;
}

// ---- The loop ----

void Core::Loop() {
  for (;;) {
    Millis wait = 0;
    bool dirty = false;
    {
      std::lock_guard lock(mu_);
      DrainInboxLocked();
      const Millis now = Now();
      const Millis due = std::min(DueEventsLocked(now), LoseSilentNodesLocked(now));
      if (now - last_usage_save_ >= kUsageSavePeriod) SaveUsageLocked(now);
      if (due <= now) continue;  // it changed something: look again
      const Millis interval =
          dirty_ ? config_.server.cycle_min_interval : config_.server.cycle_period;
      if (now - last_cycle_ >= interval) {
        CycleLocked(now);
        continue;
      }
      wait = std::min(due, last_cycle_ + interval) - now;
      dirty = dirty_;
    }
    // Waits without mu_. A submission wakes the loop only when no cycle is due already (it
    // would run after the minimum interval anyway): under a stream of submissions the loop
    // wakes once per interval, not once per job.
    std::unique_lock lock(inbox_mu_);
    loop_waits_for_inbox_ = !dirty;
    cv_.wait_for(lock, std::chrono::milliseconds(std::max<Millis>(1, wait)),
                 [&] { return stop_ || wake_ || (loop_waits_for_inbox_ && !inbox_.empty()); });
    wake_ = false;
    if (stop_) return;
  }
}

void Core::CycleLocked(Millis now) {
  last_cycle_ = now;
  dirty_ = false;
  std::vector<Job> pending;
  for (const auto& [id, entry] : jobs_) {
    if (entry.stored.status.state == JobState::kPending) pending.push_back(entry.job);
  }
  if (pending.empty()) return;
  const auto t0 = std::chrono::steady_clock::now();
  state_->AccrueUsage(now);
  const Plan plan = engine_.Schedule(*state_, pending, now);

  std::vector<Event> events;
  for (const Eviction& e : plan.evictions) {
    Event ev;
    ev.time = now;
    ev.kind = EventKind::kEvictionSignalled;
    ev.job = e.job;
    ev.actor = "scheduler";
    ev.message = fmt::format("preempted by job {}; {} sent, stopped by its grace period",
                             e.preemptor, e.signal);
    ev.stop_at = std::max(e.stop_at, now);
    events.push_back(std::move(ev));
  }
  for (const Bind& b : plan.binds) {
    Event ev;
    ev.time = std::max(now, b.start_after);  // when it starts to run
    ev.kind = EventKind::kStarted;
    ev.job = b.job;
    ev.actor = "scheduler";
    ev.allocation = store::ToStoredAllocation(b.allocation, *state_);
    events.push_back(std::move(ev));
  }
  if (!events.empty()) {
    if (Status st = AppendLocked(std::move(events)); !st.ok()) {
      fmt::print(stderr, "error: cycle at {}: the store refused the plan: {}\n", now, st.message());
      return;
    }
    if (Status st = state_->Apply(plan, pending); !st.ok()) {
      fmt::print(stderr, "internal error: the plan does not apply: {}\n", st.message());
    }
  }
  for (const Eviction& e : plan.evictions) {
    draining_[e.job] = std::max(e.stop_at, now);
    metrics_.evictions.fetch_add(1, std::memory_order_relaxed);
  }
  for (const Bind& b : plan.binds) {
    Entry& entry = jobs_.at(b.job);
    entry.run_start = std::max(now, b.start_after);
    entry.reason.clear();
    entry.never = false;
    entry.reserved_start = -1;
  }
  for (const Unplaced& u : plan.unplaced) {
    Entry& entry = jobs_.at(u.job);
    entry.reason = u.reason.Describe();
    entry.never = u.reason.verdict == Verdict::kNever;
    entry.reserved_start = u.reason.reserved_start;
  }
  metrics_.cycles.fetch_add(1, std::memory_order_relaxed);
  metrics_.cycle_seconds.Observe(SecondsSince(t0));
}

Millis Core::DueEventsLocked(Millis now) {
  std::vector<Event> events;
  Millis next = kNeverDue;
  auto event = [&](EventKind kind, JobId job, Millis time, std::string message) {
    Event ev;
    ev.time = time;
    ev.kind = kind;
    ev.job = job;
    ev.actor = options_.virtual_nodes ? "virtual-node" : "scheduler";
    ev.message = std::move(message);
    events.push_back(std::move(ev));
  };
  // A victim on an agent's node stops when its agent says its tasks are gone (or the node is
  // lost); on virtual nodes, at the end of its grace period.
  for (const auto& [id, stop_at] : draining_) {
    if (agents()) continue;
    if (stop_at <= now) {
      event(EventKind::kEvicted, id, now, "stopped after its grace period");
    } else {
      next = std::min(next, stop_at);
    }
  }
  if (options_.virtual_nodes) {
    for (const auto& [id, running] : state_->running()) {
      const Entry& entry = jobs_.at(id);
      const Millis start = entry.run_start;
      const Millis end =
          entry.job.runtime_estimate > 0 ? start + entry.job.runtime_estimate : kNeverDue;
      if (end <= now) {
        event(EventKind::kCompleted, id, end, "ran its runtime estimate on virtual nodes");
        continue;
      }
      next = std::min(next, end);
      if (entry.job.checkpoint_interval > 0) {
        const Millis interval = entry.job.checkpoint_interval;
        const Millis last = std::max(start, entry.stored.status.last_checkpoint);
        Millis due = last + interval;
        if (due >= end) continue;
        if (due <= now) {
          // The latest checkpoint due (one event, even after the server was down a while).
          due = std::min(last + (now - last) / interval * interval, end - 1);
          event(EventKind::kCheckpointed, id, due, {});
        } else {
          next = std::min(next, due);
        }
      }
    }
  }
  if (events.empty()) return next;
  std::vector<JobId> completed, evicted;
  for (const Event& ev : events) {
    if (ev.kind == EventKind::kCompleted) completed.push_back(ev.job);
    if (ev.kind == EventKind::kEvicted) evicted.push_back(ev.job);
  }
  std::vector<std::pair<JobId, Millis>> checkpoints;
  for (const Event& ev : events) {
    if (ev.kind == EventKind::kCheckpointed) checkpoints.emplace_back(ev.job, ev.time);
  }
  if (Status st = AppendLocked(std::move(events)); !st.ok()) {
    fmt::print(stderr, "error: the store refused the nodes' events: {}\n", st.message());
    return now + kMillisPerSecond;
  }
  for (JobId id : evicted) draining_.erase(id);
  for (JobId id : completed) Check(state_->Unbind(id, now), "end a completed job");
  for (const auto& [id, at] : checkpoints) {
    Check(state_->RecordCheckpoint(id, at), "record a checkpoint");
  }
  if (!completed.empty() || !evicted.empty()) dirty_ = true;
  return now;
}

Status Core::AppendLocked(std::vector<Event> events) {
  Result<std::vector<Event>> written = store_->Append(std::move(events));
  if (!written.ok()) return written.status();
  for (const Event& ev : *written) ApplyLocked(ev);
  BumpAssignments();
  return Status::Ok();
}

Status Core::RebindLocked(const Job& job, Millis now) {
  const RunningJob* running = state_->FindRunning(job.id);
  if (running == nullptr) {
    return Status::Internal(fmt::format("job {} is not running in the state", job.id));
  }
  const Allocation allocation = running->allocation;
  const Millis start = running->start_time, checkpoint = running->last_checkpoint;
  const Job before = running->job;
  if (Status st = state_->Unbind(job.id, now); !st.ok()) return st;
  if (Status st = state_->Bind(job, allocation, start); !st.ok()) {
    // Its devices were its own a moment ago: bound back as it was, it fits.
    Check(state_->Bind(before, allocation, start), "bind a job back as it was");
    if (checkpoint >= 0) Check(state_->RecordCheckpoint(job.id, checkpoint), "record a checkpoint");
    return st;
  }
  if (checkpoint >= 0) return state_->RecordCheckpoint(job.id, checkpoint);
  return Status::Ok();
}

void Core::Check(const Status& status, std::string_view what) {
  if (status.ok()) return;
  metrics_.internal_errors.fetch_add(1, std::memory_order_relaxed);
  fmt::print(stderr,
             "error: internal: cannot {}: {} (memory may disagree with the store until the server "
             "restarts)\n",
             what, status.message());
}

void Core::ApplyLocked(const Event& event) {
  auto it = jobs_.find(event.job);
  if (it == jobs_.end()) return;
  Entry& entry = it->second;
  const bool was_finished = store::IsFinished(entry.stored.status.state);
  // The store has applied the same event to the same status: it cannot be refused here.
  Check(store::ApplyEvent(entry.stored.status, event), "apply a stored event");
  if (event.kind == EventKind::kStarted) {
    entry.reports.clear();
    RememberNodes(entry);
  }
  if (event.kind != EventKind::kStarted && entry.stored.status.state == JobState::kPending) {
    entry.run_start = -1;
  }
  if (!was_finished && store::IsFinished(entry.stored.status.state)) Finish(entry);
}

void Core::RememberNodes(Entry& entry) {
  for (const store::StoredTask& t : entry.stored.status.allocation.tasks) {
    std::uint32_t rank = t.index;
    for (std::uint32_t g = 0; g < t.group && g < entry.stored.spec.groups.size(); ++g)
      rank += static_cast<std::uint32_t>(entry.stored.spec.groups[g].count);
    if (entry.last_nodes.size() <= rank) entry.last_nodes.resize(rank + 1);
    entry.last_nodes[rank] = t.node;
  }
}

void Core::Finish(Entry& entry) {
  entry.reason.clear();
  {
    std::lock_guard lock(inbox_mu_);
    if (--active_[entry.stored.spec.user] <= 0) active_.erase(entry.stored.spec.user);
  }
  finished_.push_back(entry.stored.id);
  while (finished_.size() > options_.finished_kept) {
    jobs_.erase(finished_.front());
    finished_.pop_front();
  }
}

Core::Entry* Core::FindLocked(JobId id) {
  DrainInboxLocked();
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : &it->second;
}

// ---- Jobs ----

Answer Core::Submit(const Caller& caller, std::string_view body) {
  const auto t0 = std::chrono::steady_clock::now();
  if (caller.role == Role::kAgent) {
    return Status::PermissionDenied("an agent token may not submit jobs");
  }
  // The job pipeline of every reader of jobs: the JSON reader, the validator (the limits of
  // config/limits.h), the resolver.
  Result<store::JobSpec> spec = store::DecodeJobSpec(body);
  if (!spec.ok()) {
    // An error of no one field (malformed JSON, not an object) concerns the whole body.
    if (spec.status().field().empty())
      return Status::InvalidArgument(spec.status().detail(), "body");
    return std::move(spec).status();
  }
  if (!spec->user.empty() || spec->submit_time != 0) {
    return Status::InvalidArgument(
        "set by the server (the token's identity, the time of acceptance); leave it out",
        spec->user.empty() ? "submit_time_ms" : "user");
  }
  spec->user = caller.name;
  spec->submit_time = Now();
  if (Status st = store::ValidateJobSpec(*spec); !st.ok()) return st;
  if (agents() && spec->argv.empty() && spec->command.empty()) {
    return Status::InvalidArgument(
        "the nodes' agents run each task: give argv (a program and its arguments) or command (a "
        "shell command)",
        "argv");
  }
  Job job;
  {
    std::lock_guard lock(probe_mu_);
    Result<Job> resolved = store::ToJob(kProbeId, *spec, *probe_);
    if (!resolved.ok()) return std::move(resolved).status();
    job = std::move(resolved).value();
    if (caller.role == Role::kUser &&
        std::find(caller.queues.begin(), caller.queues.end(), spec->queue) == caller.queues.end()) {
      return Status::PermissionDenied(
          fmt::format("{} may not submit to queue '{}' (allowed: {})", caller.name, spec->queue,
                      caller.queues.empty() ? "none" : Join(caller.queues)),
          "queue");
    }
    // A job that could never fit is refused now rather than left pending forever: one cycle
    // over this job alone on the configured cluster with nothing running places it, or says
    // why not and whether waiting could ever help (Verdict::kNever).
    const Plan probe =
        probe_engine_.Schedule(*probe_, std::span<const Job>(&job, 1), spec->submit_time);
    for (const Unplaced& u : probe.unplaced) {
      if (u.reason.verdict != Verdict::kNever) continue;
      const char* field = u.reason.stage == Stage::kQuota ? "queue" : "groups";
      return Status::InvalidArgument(u.reason.Describe(), field);
    }
  }
  {
    std::lock_guard lock(inbox_mu_);
    const std::int64_t limit = base_.server.max_active_jobs_per_user;
    std::int64_t& active = active_[spec->user];
    if (limit > 0 && active >= limit) {
      // Valid, but more than the user's share now: it may be taken once jobs finish.
      return Status::Conflict(fmt::format("{} has {} pending, held or running jobs, the most "
                                          "allowed (server.max_active_jobs_per_user)",
                                          spec->user, active),
                              "user");
    }
    ++active;  // reserved while the store commits
  }
  const std::string name = spec->name;
  Result<store::Submitted> submitted = store_->Submit(*spec);
  std::lock_guard lock(inbox_mu_);
  if (!submitted.ok() || submitted->duplicate) {
    if (--active_[spec->user] <= 0) active_.erase(spec->user);
    if (!submitted.ok()) return std::move(submitted).status().WithContext("store: ");
    return Answer(Json{{"id", submitted->id}, {"duplicate", true}});
  }
  const JobId id = submitted->id;
  Entry entry;
  entry.stored.id = id;
  entry.stored.status.priority_class = spec->priority_class;
  entry.stored.spec = std::move(spec).value();
  job.id = id;
  entry.job = std::move(job);
  const bool wake = inbox_.empty() && loop_waits_for_inbox_;
  inbox_.push_back(std::move(entry));
  if (wake) cv_.notify_one();
  metrics_.submitted.fetch_add(1, std::memory_order_relaxed);
  metrics_.submit_seconds.Observe(SecondsSince(t0));
  return Answer(Json{{"id", id}, {"name", name}, {"duplicate", false}}, true);
}

namespace {

// A stored job as the API shows it: the store's record and the job's GPUs in all.
Json StoredJobJson(const store::StoredJob& job) {
  Json out = store::StoredJobToJson(job);
  std::int64_t milli = 0;
  for (const TaskGroup& g : job.spec.groups) milli += g.count * g.request.gpu.value();
  out["gpu_milli"] = milli;
  return out;
}

}  // namespace

Json Core::JobJson(const Entry& entry) const {
  Json out = StoredJobJson(entry.stored);
  const JobState state = entry.stored.status.state;
  if (state == JobState::kPending || state == JobState::kHeld) {
    std::string reason = state == JobState::kHeld ? "held: not scheduled until released"
                         : entry.reason.empty()   ? "waiting for the next scheduling cycle"
                                                  : entry.reason;
    out["reason"] = reason;
    out["verdict"] = entry.never ? "never" : "wait";
    if (entry.reserved_start >= 0) out["reserved_start_ms"] = entry.reserved_start;
  }
  if (state == JobState::kRunning) {
    Json tasks = Json::array();
    Result<Allocation> allocation = store::ToAllocation(entry.stored.status.allocation, *state_);
    if (allocation.ok()) {
      for (const TaskAllocation& t : allocation->tasks) tasks.push_back(state_->Describe(t));
    }
    out["tasks"] = std::move(tasks);
    if (auto it = draining_.find(entry.stored.id); it != draining_.end()) {
      out["reason"] = fmt::format("evicted: stopping by {}", it->second);
    }
  }
  return out;
}

Answer Core::ListJobs(const JobFilter& filter) {
  std::lock_guard lock(mu_);
  DrainInboxLocked();
  Json jobs = Json::array();
  for (const auto& [id, entry] : jobs_) {
    if (jobs.size() >= filter.limit) break;
    const store::StoredJob& s = entry.stored;
    if (!filter.queue.empty() && s.spec.queue != filter.queue) continue;
    if (!filter.user.empty() && s.spec.user != filter.user) continue;
    if (filter.state && s.status.state != *filter.state) continue;
    jobs.push_back(JobJson(entry));
  }
  return Answer(Json{{"jobs", std::move(jobs)}});
}

Answer Core::GetJob(JobId id) {
  {
    std::lock_guard lock(mu_);
    DrainInboxLocked();
    auto it = jobs_.find(id);
    if (it != jobs_.end()) return Answer(JobJson(it->second));
  }
  // Finished long ago: from the store.
  Result<std::optional<store::StoredJob>> stored = store_->GetJob(id);
  if (!stored.ok()) return std::move(stored).status().WithContext("store: ");
  if (!*stored) return Status::NotFound(fmt::format("no job {}", id), "job");
  return Answer(StoredJobJson(**stored));
}

Answer Core::CheckOwner(const Caller& caller, const Entry& entry, const char* what) const {
  if (caller.admin()) return {};
  if (caller.role == Role::kUser && caller.name == entry.stored.spec.user) return {};
  return Status::PermissionDenied(fmt::format("{} may not {} job {} (submitted by {})", caller.name,
                                              what, entry.stored.id, entry.stored.spec.user));
}

Answer Core::Cancel(const Caller& caller, JobId id) {
  std::lock_guard lock(mu_);
  Entry* entry = FindLocked(id);
  if (!entry) return Status::NotFound(fmt::format("no active job {}", id), "job");
  if (Answer a = CheckOwner(caller, *entry, "cancel"); !a.ok()) return a;
  const JobState from = entry->stored.status.state;
  if (store::IsFinished(from)) {
    return Status::Conflict(fmt::format("job {} is already {}", id, store::JobStateName(from)));
  }
  Event ev;
  ev.time = Now();
  ev.kind = EventKind::kCancelled;
  ev.job = id;
  ev.actor = caller.name;
  ev.message = "cancelled by " + caller.name;
  if (Status st = AppendLocked({ev}); !st.ok()) return std::move(st).WithContext("store: ");
  if (from == JobState::kRunning && draining_.erase(id) == 0) {
    Check(state_->Unbind(id, ev.time), "end a cancelled job");
  }
  Wake();
  return Answer(JobJson(jobs_.at(id)));
}

Answer Core::SetPriority(const Caller& caller, JobId id, const std::string& priority_class) {
  std::lock_guard lock(mu_);
  Entry* entry = FindLocked(id);
  if (!entry) return Status::NotFound(fmt::format("no active job {}", id), "job");
  if (Answer a = CheckOwner(caller, *entry, "change the priority of"); !a.ok()) return a;
  std::optional<PriorityClassId> pc = state_->FindPriorityClass(priority_class);
  if (!pc) {
    std::vector<std::string> known;
    for (PriorityClassId c = 0; c < state_->priority_class_count(); ++c)
      known.push_back(state_->priority_class(c).name);
    return Status::NotFound(store::UnknownName("priority class", priority_class, known),
                            "priority_class");
  }
  const PriorityClassSpec& current = state_->priority_class(entry->job.priority_class);
  if (!caller.admin() && state_->priority_class(*pc).value > current.value) {
    return Status::PermissionDenied(fmt::format("a user may only lower a job's priority ({} "
                                                "is above {})",
                                                priority_class, current.name),
                                    "priority_class");
  }
  if (store::IsFinished(entry->stored.status.state)) {
    return Status::Conflict(
        fmt::format("job {} is already {}", id, store::JobStateName(entry->stored.status.state)));
  }
  Event ev;
  ev.time = Now();
  ev.kind = EventKind::kPriorityChanged;
  ev.job = id;
  ev.actor = caller.name;
  ev.priority_class = priority_class;
  // A running job's class matters to the victim search: it is bound again under its new class.
  // Memory is changed first and changed back if the store refuses the event, so that a failure
  // on either side leaves both as they were.
  const bool rebind = entry->stored.status.state == JobState::kRunning && !draining_.count(id) &&
                      state_->FindRunning(id) != nullptr;
  Job changed = entry->job;
  changed.priority_class = *pc;
  if (rebind) {
    if (Status st = RebindLocked(changed, ev.time); !st.ok()) {
      return Status::Internal(
          fmt::format("job {}: cannot bind it under class {}: {}; nothing "
                      "changed",
                      id, priority_class, st.message()));
    }
  }
  if (Status st = AppendLocked({ev}); !st.ok()) {
    if (rebind) Check(RebindLocked(entry->job, ev.time), "bind a job back under its class");
    return std::move(st).WithContext("store: ");
  }
  entry->job = std::move(changed);
  Wake();
  return Answer(JobJson(*entry));
}

Answer Core::Hold(const Caller& caller, JobId id, bool hold) {
  std::lock_guard lock(mu_);
  Entry* entry = FindLocked(id);
  if (!entry) return Status::NotFound(fmt::format("no active job {}", id), "job");
  if (!hold && !caller.admin()) {
    return Status::PermissionDenied(
        fmt::format("{} may not release job {}: only an admin releases", caller.name, id));
  }
  if (Answer a = CheckOwner(caller, *entry, "hold"); !a.ok()) return a;
  const JobState want = hold ? JobState::kPending : JobState::kHeld;
  if (entry->stored.status.state != want) {
    return Status::Conflict(fmt::format("job {} is {}; only a {} job can be {}", id,
                                        store::JobStateName(entry->stored.status.state),
                                        store::JobStateName(want), hold ? "held" : "released"));
  }
  Event ev;
  ev.time = Now();
  ev.kind = hold ? EventKind::kHeld : EventKind::kReleased;
  ev.job = id;
  ev.actor = caller.name;
  if (Status st = AppendLocked({ev}); !st.ok()) return std::move(st).WithContext("store: ");
  Wake();
  return Answer(JobJson(*entry));
}

// ---- Queues and nodes ----

Answer Core::ListQueues() {
  std::lock_guard lock(mu_);
  DrainInboxLocked();
  state_->AccrueUsage(Now());
  const ClusterState& state = *state_;
  std::vector<std::map<std::string, std::int64_t>> counts(state.queue_count());
  for (const auto& [id, entry] : jobs_) {
    if (store::IsFinished(entry.stored.status.state)) continue;
    ++counts[entry.job.queue][store::JobStateName(entry.stored.status.state)];
  }
  Json queues = Json::array();
  for (QueueId q = 0; q < state.queue_count(); ++q) {
    const QueueInfo& info = state.queue(q);
    Json resources = Json::array();
    for (std::size_t r = 0; r < state.quota_resource_count(); ++r) {
      const QuotaLimits& limits = state.quota(q, r);
      const std::int64_t usage = state.usage(q, r);
      if (!limits.limited && usage == 0) continue;
      Json res{{"resource", r == 0 ? std::string(kAllGpusResource)
                                   : state.gpu_type_name(static_cast<GpuTypeId>(r - 1))},
               {"usage_milli", usage}};
      if (limits.limited) {
        res["nominal_milli"] = limits.nominal;
        res["max_milli"] = MilliOrNull(limits.max);
        res["borrowing_limit_milli"] = MilliOrNull(limits.borrowing_limit);
        res["lending_limit_milli"] = MilliOrNull(limits.lending_limit);
      }
      resources.push_back(std::move(res));
    }
    Json jobs = Json::object();
    for (const auto& [s, n] : counts[q]) jobs[s] = n;
    queues.push_back(Json{
        {"name", info.spec.name},
        {"parent", info.parent == kNone ? Json(nullptr) : Json(state.queue(info.parent).spec.name)},
        {"leaf", info.children.empty()},
        {"priority", info.spec.priority},
        {"weight", info.spec.weight},
        {"quota", store::QuotaToJson(info.spec.quota)},
        {"resources", std::move(resources)},
        // The fair-share factor's input: GPU-seconds, decayed with the
        // half-life (scheduler.fair_share_half_life).
        {"recent_gpu_seconds", state.recent_usage(q) / 1e6},
        {"jobs", std::move(jobs)}});
  }
  return Answer(Json{{"queues", std::move(queues)}});
}

Answer Core::SetQueueQuota(const Caller& caller, const std::string& queue, const Json& quota) {
  if (!caller.admin())
    return Status::PermissionDenied(fmt::format("{} may not change quotas (admin)", caller.name));
  std::lock_guard lock(mu_);
  auto find = [&](config::ClusterConfig& c) {
    return std::find_if(c.cluster.queues.begin(), c.cluster.queues.end(),
                        [&](const QueueSpec& s) { return s.name == queue; });
  };
  config::ClusterConfig changed = config_;
  auto it = find(changed);
  if (it == changed.cluster.queues.end())
    return Status::NotFound(fmt::format("no queue '{}'", queue), "queue");
  const Millis now = Now();
  if (quota.is_null()) {
    const config::ClusterConfig& base = base_;
    it->quota = std::find_if(base.cluster.queues.begin(), base.cluster.queues.end(),
                             [&](const QueueSpec& s) { return s.name == queue; })
                    ->quota;
  } else {
    Result<std::map<std::string, QuotaSpec>> parsed = store::QuotaFromJson(quota, "quota");
    if (!parsed.ok()) return std::move(parsed).status();
    it->quota = *parsed;
  }
  if (Result<ClusterState> check = ClusterState::Create(changed.cluster); !check.ok()) {
    return Status::InvalidArgument(check.status().message(), "quota");
  }
  Result<Event> written = quota.is_null()
                              ? store_->ResetQueueQuota(queue, now, caller.name)
                              : store_->SetQueueQuota({queue, it->quota, now, caller.name});
  if (!written.ok()) return std::move(written).status().WithContext("store: ");
  // The same configuration was just created: a failure here is a broken invariant, after the
  // store has recorded the change.
  if (Status st = RebuildState(changed); !st.ok()) {
    Check(st, "apply a quota change");
    return st;
  }
  config_ = std::move(changed);
  Wake();
  return Answer(Json{{"queue", queue}, {"quota", store::QuotaToJson(find(config_)->quota)}});
}

Answer Core::ListNodes() const {
  std::lock_guard lock(mu_);
  const ClusterState& state = *state_;
  Json nodes = Json::array();
  for (NodeId n = 0; n < state.node_count(); ++n) {
    const NodeState& node = state.node(n);
    Json gpus = Json::array();
    std::int64_t free = 0;
    for (std::size_t d = 0; d < node.devices.size(); ++d) {
      const DeviceState& dev = node.devices[d];
      free += dev.free.value();
      gpus.push_back(Json{{"index", d},
                          {"type", state.gpu_type_name(dev.type)},
                          {"free_milli", dev.free.value()},
                          {"memory_free_mib", dev.memory_free.value()}});
    }
    Json jobs = Json::array();
    for (const Resident& r : node.residents) jobs.push_back(r.job->job.id);
    std::string admin = node.cordoned ? "cordoned" : "schedulable";
    std::string reason;
    if (auto it = nodes_admin_.find(node.name); it != nodes_admin_.end()) {
      admin = store::NodeAdminStateName(it->second.state);
      reason = it->second.reason;
    }
    Json agent = nullptr;
    if (auto a = agent_nodes_.find(node.name); a != agent_nodes_.end()) {
      const AgentNode& an = a->second;
      agent = Json{{"state", an.lost         ? "lost"
                             : an.registered ? "ready"
                                             : "waiting"},
                   {"last_seen_ms", an.last_seen},
                   {"address", an.address},
                   {"reported", an.reported}};
      if (!an.problem.empty()) agent["problem"] = an.problem;
    }
    nodes.push_back(
        Json{{"name", node.name},
             {"state", admin},
             {"reason", reason},
             {"healthy", node.healthy},
             {"agent", std::move(agent)},
             {"gpus", std::move(gpus)},
             {"gpu_milli", static_cast<std::int64_t>(node.devices.size()) * kMilliPerGpu},
             {"gpu_free_milli", free},
             {"cpu_milli", node.cpu.value()},
             {"cpu_free_milli", node.cpu_free.value()},
             {"memory_mib", node.memory.value()},
             {"memory_free_mib", node.memory_free.value()},
             {"jobs", std::move(jobs)}});
  }
  return Answer(Json{{"nodes", std::move(nodes)}});
}

Answer Core::SetNodeState(const Caller& caller, const std::string& name,
                          store::NodeAdminState admin, const std::string& reason) {
  if (!caller.admin()) {
    return Status::PermissionDenied(
        fmt::format("{} may not cordon, uncordon or drain nodes (admin)", caller.name));
  }
  std::lock_guard lock(mu_);
  std::optional<NodeId> node = state_->FindNode(name);
  if (!node) return Status::NotFound(fmt::format("no node '{}'", name), "node");
  const Millis now = Now();
  Result<Event> written = store_->SetNodeState({name, admin, reason, now, caller.name});
  if (!written.ok()) return std::move(written).status().WithContext("store: ");
  const bool cordoned = admin != store::NodeAdminState::kSchedulable;
  Check(state_->SetCordoned(*node, cordoned), "cordon a node");
  for (NodeSpec& spec : config_.cluster.nodes) {
    if (spec.name == name) spec.cordoned = cordoned;
  }
  if (cordoned) {
    nodes_admin_[name] = {name, admin, reason, now, caller.name};
  } else {
    nodes_admin_.erase(name);
  }
  if (admin == store::NodeAdminState::kDraining) {
    // Move its jobs off: requeued (not counted as evictions), placed again by the next cycle.
    std::vector<Event> events;
    for (const Resident& r : state_->node(*node).residents) {
      Event ev;
      ev.time = now;
      ev.kind = EventKind::kRequeued;
      ev.job = r.job->job.id;
      ev.actor = caller.name;
      ev.message = fmt::format("node {} drained", name);
      events.push_back(std::move(ev));
    }
    std::vector<JobId> ids;
    for (const Event& ev : events) ids.push_back(ev.job);
    if (!events.empty()) {
      if (Status st = AppendLocked(std::move(events)); !st.ok())
        return std::move(st).WithContext("store: ");
      for (JobId id : ids) Check(state_->Unbind(id, now), "requeue a drained node's job");
    }
  }
  Wake();
  return Answer(Json{{"node", name}, {"state", store::NodeAdminStateName(admin)}});
}

// ---- Events and metrics ----

Answer Core::Events(std::uint64_t cursor, std::size_t limit, std::chrono::milliseconds wait) const {
  Result<std::vector<Event>> events = store_->EventsSince(cursor, limit);
  if (events.ok() && events->empty() && wait.count() > 0) {
    store_->WaitForEvents(cursor, wait);
    events = store_->EventsSince(cursor, limit);
  }
  if (!events.ok()) return std::move(events).status().WithContext("store: ");
  Json list = Json::array();
  std::uint64_t last = cursor;
  for (const Event& e : *events) {
    list.push_back(store::EventToJson(e));
    last = e.seq;
  }
  return Answer(Json{{"events", std::move(list)}, {"cursor", last}});
}

std::string Core::MetricsText() {
  std::string out;
  {
    std::lock_guard lock(mu_);
    DrainInboxLocked();
    const ClusterState& state = *state_;
    std::vector<std::int64_t> pending(state.queue_count(), 0);
    for (const auto& [id, entry] : jobs_) {
      if (entry.stored.status.state == JobState::kPending) ++pending[entry.job.queue];
    }
    out +=
        "# HELP arbiter_queue_pending_jobs Jobs waiting to be placed, per queue.\n"
        "# TYPE arbiter_queue_pending_jobs gauge\n";
    for (QueueId q = 0; q < state.queue_count(); ++q) {
      if (!state.queue(q).children.empty()) continue;
      out += fmt::format("arbiter_queue_pending_jobs{{queue=\"{}\"}} {}\n",
                         state.queue(q).spec.name, pending[q]);
    }
    std::vector<std::int64_t> milli(state.gpu_type_count(), 0);
    for (const auto& [id, running] : state.running()) {
      for (const TaskAllocation& t : running.allocation.tasks) {
        for (const DeviceShare& d : t.devices) milli[running.allocation.gpu_type] += d.gpu.value();
      }
    }
    out += fmt::format(
        "# HELP arbiter_running_jobs Jobs holding an allocation.\n"
        "# TYPE arbiter_running_jobs gauge\narbiter_running_jobs {}\n",
        state.running().size());
    out +=
        "# HELP arbiter_allocated_gpus GPUs allocated to running jobs, per GPU type.\n"
        "# TYPE arbiter_allocated_gpus gauge\n";
    for (GpuTypeId t = 0; t < state.gpu_type_count(); ++t) {
      out += fmt::format("arbiter_allocated_gpus{{type=\"{}\"}} {}\n", state.gpu_type_name(t),
                         static_cast<double>(milli[t]) / kMilliPerGpu);
    }
  }
  out += fmt::format(
      "# HELP arbiter_evictions_total Jobs evicted by the scheduler.\n"
      "# TYPE arbiter_evictions_total counter\narbiter_evictions_total {}\n"
      "# HELP arbiter_jobs_submitted_total Jobs accepted.\n"
      "# TYPE arbiter_jobs_submitted_total counter\narbiter_jobs_submitted_total {}\n"
      "# HELP arbiter_cycles_total Scheduling cycles run.\n"
      "# TYPE arbiter_cycles_total counter\narbiter_cycles_total {}\n"
      "# HELP arbiter_bad_requests_total Requests refused as bad input.\n"
      "# TYPE arbiter_bad_requests_total counter\narbiter_bad_requests_total {}\n"
      "# HELP arbiter_internal_errors_total State changes that failed after the store had "
      "recorded them (restart the server to rebuild from the store).\n"
      "# TYPE arbiter_internal_errors_total counter\narbiter_internal_errors_total {}\n",
      metrics_.evictions.load(), metrics_.submitted.load(), metrics_.cycles.load(),
      metrics_.bad_requests.load(), metrics_.internal_errors.load());
  out += metrics_.cycle_seconds.Text("arbiter_cycle_duration_seconds",
                                     "Time of one scheduling cycle.");
  out += metrics_.submit_seconds.Text("arbiter_submit_duration_seconds",
                                      "Time from a submission's arrival to its durable commit.");
  return out;
}

}  // namespace arbiter::server
