#include "server/core.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <optional>
#include <span>
#include <thread>
#include <unordered_map>

#include "arbiter/attained_service.h"
#include "crypto/crypto.h"
#include "job/names.h"
#include "job/resolve.h"
#include "store/codec.h"

namespace arbiter::server {
namespace {

using Json = nlohmann::json;
using job::JobState;
using store::Event;
using store::EventKind;
using Role = config::TokenSpec::Role;

// The scheduling loop's engine times its stages (arbiter_cycle_stage_duration_seconds) with the
// steady clock; the clock changes no decision.
EngineOptions Timed(EngineOptions options) {
  options.clock_micros = [] {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  };
  return options;
}

// The orders that read a job's service (Job::attained, time_on_model, service_time).
bool ReadsService(OrderPolicy policy) { return IsLas(policy) || IsLeaseOrder(policy); }

// The GPU milli-units of a stored run: all its tasks' shares.
std::int64_t GpuMilliOf(const job::StoredAllocation& allocation) {
  std::int64_t milli = 0;
  for (const job::StoredTask& task : allocation.tasks) {
    for (const DeviceShare& share : task.devices) milli += share.gpu.value();
  }
  return milli;
}

}  // namespace

Millis CountRun(Job& job, Millis& run_start, Millis& ran, GpuTypeId ran_on, const Event& event,
                JobState after, const ClusterState* state, const OrderingWeights& w) {
  Millis whole = -1;
  if (event.kind == EventKind::kCompleted)
    whole = ran + (run_start >= 0 ? std::max<Millis>(0, event.time - run_start) : 0);
  if (event.kind != EventKind::kStarted && after == JobState::kPending) {
    if (run_start >= 0) {
      const Millis run = std::max<Millis>(0, event.time - run_start);
      job.attained += state ? ServiceOfRun(*state, job, ran_on, run, w) : run;
      ran += run;
      AddTimeOnModel(job.time_on_model, ran_on, run);
      job.service_time = event.time;
    }
    run_start = -1;
  }
  return whole;
}

Core::Core(config::ClusterConfig config, std::unique_ptr<store::Store> store, CoreOptions options)
    : options_(std::move(options)),
      base_(config),
      store_(std::move(store)),
      config_(std::move(config)),
      engine_(Timed(config_.engine)),
      probe_engine_(config_.engine),
      incarnation_(crypto::RandomHex(4)) {
  feed_ = std::make_unique<EventFeed>(store_->LastSeq(),
                                      static_cast<std::size_t>(config_.server.event_window_bytes));
  store_->SetCommitListener(
      [feed = feed_.get()](std::span<const Event> events) { feed->Publish(events); });
}

Core::Changes::~Changes() {
  std::vector<std::function<void()>> wake = core_.PublishAssignmentsLocked();
  lock_.unlock();
  for (std::function<void()>& fn : wake) fn();
}

void Core::Stop() {
  {
    std::lock_guard lock(inbox_mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (loop_.joinable()) loop_.join();
  if (recent_.joinable()) recent_.join();
}

Core::~Core() {
  Stop();
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
                                         std::unique_ptr<store::Store> store, CoreOptions options,
                                         std::unique_ptr<Warm> warm) {
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
    if (Status st = core->Recover(std::move(warm)); !st.ok()) return st;
    core->InitAgentsLocked(core->Now());
  }
  core->loop_ = std::thread([c = core.get()] { c->Loop(); });
  core->recent_ = std::thread([c = core.get()] { c->LoadRecentFinished(); });
  return core;
}

void Core::LoadRecentFinished() {
  Result<std::vector<store::StoredJob>> recent = store_->RecentFinished(options_.finished_kept);
  if (!recent.ok()) {
    // The listing stays partial (it says so); each job is still read from the store by its id.
    fmt::print(stderr, "warning: the recent finished jobs were not read again: {}\n",
               recent.status().message());
    return;
  }
  std::lock_guard lock(mu_);
  std::deque<JobId> older;  // oldest first
  for (auto it = recent->rbegin(); it != recent->rend(); ++it) {
    const JobId id = it->id;
    Entry entry;
    entry.stored = std::move(*it);
    if (jobs_.emplace(id, std::move(entry)).second) older.push_back(id);
  }
  finished_.insert(finished_.begin(), older.begin(), older.end());
  while (finished_.size() > options_.finished_kept) {
    jobs_.erase(finished_.front());
    finished_.pop_front();
  }
  recent_loaded_ = true;
}

Status Core::ResolveInto(std::span<store::StoredJob> batch, const ClusterState& names,
                         std::map<JobId, Entry>& into) {
  // Each batch is resolved and moved into entries by every processor, each into a map of its
  // own (allocating and filling a million entries is most of a recovery's work), whose nodes are
  // then spliced into `into` without copying.
  const std::size_t parts = std::clamp<std::size_t>(std::thread::hardware_concurrency(), 1, 8);
  std::vector<std::map<JobId, Entry>> local(parts);
  std::vector<std::string> errors(parts);
  std::vector<std::size_t> failed(parts);
  auto resolve = [&](std::size_t p) {
    for (std::size_t i = batch.size() * p / parts; i < batch.size() * (p + 1) / parts; ++i) {
      store::StoredJob& stored = batch[i];
      Result<Job> job = job::ToJob(stored.id, stored.spec, names, stored.status.priority_class);
      if (!job.ok()) {
        errors[p] = job.status().message();
        failed[p] = i;
        return;
      }
      const JobId id = stored.id;
      const Millis run_start =
          stored.status.state == JobState::kRunning ? stored.status.start_time : -1;
      Entry entry;
      entry.stored = std::move(stored);
      entry.job = std::move(job).value();
      entry.run_start = run_start;
      local[p].emplace_hint(local[p].end(), id, std::move(entry));
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
          "store: job {} ({}) no longer fits the configuration: {}; restore the configuration it "
          "was accepted under",
          stored.id, stored.spec.name, errors[p]));
    }
    while (!local[p].empty()) {
      auto node = local[p].extract(local[p].begin());
      if (into.empty() || into.rbegin()->first < node.key()) {
        into.insert(into.end(), std::move(node));  // a whole load: by id
        continue;
      }
      auto at = into.lower_bound(node.key());
      if (at != into.end() && at->first == node.key()) at = into.erase(at);  // read again
      into.insert(at, std::move(node));
    }
  }
  return Status::Ok();
}

Result<std::unique_ptr<Core::Warm>> Core::Warm::Load(const config::ClusterConfig& config,
                                                     store::Store& store,
                                                     const std::atomic<bool>* cancel) {
  std::unique_ptr<Warm> warm(new Warm());
  Result<ClusterState> names = ClusterState::Create(config.cluster);
  if (!names.ok()) return Status(names.status()).WithContext("configuration: ");
  warm->names_.emplace(std::move(names).value());
  auto each_batch = [&](std::span<store::StoredJob> batch) -> Status {
    if (cancel != nullptr && cancel->load()) return Status::Unavailable("cancelled");
    return ResolveInto(batch, *warm->names_, warm->jobs_);
  };
  Result<store::Snapshot> snapshot =
      store.Load({.include_finished = false, .each_batch = each_batch});
  if (!snapshot.ok()) return snapshot.status();
  warm->last_seq_ = snapshot->last_seq;
  return warm;
}

Status Core::Warm::CatchUp(store::Store& store) {
  Result<store::JobChanges> changes = store.JobsChangedSince(last_seq_);
  if (!changes.ok()) return changes.status();
  std::vector<store::StoredJob> active;
  for (store::StoredJob& job : changes->jobs) {
    if (job::IsFinished(job.status.state)) {
      jobs_.erase(job.id);
    } else {
      active.push_back(std::move(job));
    }
  }
  if (Status st = ResolveInto(active, *names_, jobs_); !st.ok()) return st;
  last_seq_ = changes->last_seq;
  return Status::Ok();
}

Status Core::Recover(std::unique_ptr<Warm> warm) {
  // The jobs are resolved against the configured names (queues, classes, GPU types, levels),
  // which the stored quota overrides and node states do not change (Warm::names_).
  std::unique_lock inbox(inbox_mu_);
  // The active jobs: a standby's copy, caught up with what changed since it last read, else read
  // whole the same way. (Nothing else writes meanwhile: a single server's store is its own, and a
  // leader's predecessor is fenced.) Then the rest of the store.
  if (!warm) {
    Result<std::unique_ptr<Warm>> read = Warm::Load(config_, *store_);
    if (!read.ok()) return read.status();
    warm = std::move(read).value();
  } else if (Status st = warm->CatchUp(*store_); !st.ok()) {
    return st;
  }
  jobs_ = std::move(warm->jobs_);
  const std::uint64_t last_seq = warm->last_seq_;
  Result<store::Snapshot> snapshot =
      store_->Load({.include_finished = false, .include_jobs = false});
  if (!snapshot.ok()) return snapshot.status();
  std::map<std::string, Active>::iterator user = active_.end();
  for (auto& [id, entry] : jobs_) {
    if (entry.stored.status.state == JobState::kRunning) {
      RememberNodes(entry);
      if (entry.stored.status.stop_at >= 0) draining_[id] = entry.stored.status.stop_at;
    }
    // Most jobs come from few users: look the counter up only when the user changes.
    if (user == active_.end() || user->first != entry.stored.spec.user) {
      user = active_.try_emplace(entry.stored.spec.user).first;
    }
    user->second.Add(entry.stored.spec, 1);
  }
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
  // The service the orders read (attained, time on each model, the last stop; a Gittins order's
  // completed sizes) is not in a job's status: it is counted again from the store's events, as
  // it was counted when they were applied.
  std::vector<std::pair<Millis, std::int64_t>> completions;  // whole run time, GPU milli
  if (ReadsService(config_.engine.ordering.policy)) {
    if (Status st = ReplayService(*warm->names_, last_seq, completions); !st.ok()) return st;
  }
  if (Status st = RebuildState(config_); !st.ok()) return st;
  for (const auto& [whole, milli] : completions)
    RecordCompletion(*state_, config_.engine.ordering, whole, milli);
  // The queues' fair-share usage as last saved (decayed from then by the next cycle).
  for (const store::QueueUsage& u : usage) {
    if (std::optional<QueueId> q = state_->FindQueue(u.queue)) {
      state_->RestoreRecentUsage(*q, u.usage, u.time);
    }
  }
  last_usage_save_ = Now();
  return Status::Ok();
}

Status Core::ReplayService(const ClusterState& names, std::uint64_t last_seq,
                           std::vector<std::pair<Millis, std::int64_t>>& completions) {
  const OrderingWeights& w = config_.engine.ordering;
  // Per job: the run open and the time run before it, the model of that run, its GPUs. The
  // finished jobs' runs are followed too under a Gittins order (it learns their sizes).
  struct Runs {
    Millis run_start = -1;
    Millis ran = 0;
    GpuTypeId ran_on = kNone;
    std::int64_t milli = 0;
  };
  std::unordered_map<JobId, Runs> runs;
  const bool completions_count = w.policy == OrderPolicy::kGittins;
  Job finished;  // a finished job's service is counted nowhere
  constexpr std::size_t kBatch = 10000;
  for (std::uint64_t cursor = 0;;) {
    Result<std::vector<Event>> events = store_->EventsSince(cursor, kBatch);
    if (!events.ok()) return Status(events.status()).WithContext("store: read the events: ");
    for (const Event& event : *events) {
      cursor = event.seq;
      if (cursor > last_seq) break;  // (after the jobs were loaded)
      if (!store::IsJobEvent(event.kind)) continue;
      auto it = jobs_.find(event.job);
      if (it == jobs_.end() && !completions_count) continue;
      Job& job = it != jobs_.end() ? it->second.job : finished;
      Runs& r = runs[event.job];
      if (event.kind == EventKind::kStarted) {
        r.run_start = event.time;
        const std::optional<GpuTypeId> type = names.FindGpuType(event.allocation.gpu_type);
        r.ran_on = type ? *type : kNone;
        r.milli = GpuMilliOf(event.allocation);
        // (As the cycle that started it did: at the time it starts to run.)
        if (&job != &finished) BeginService(job, event.time, w);
        continue;
      }
      const Millis whole =
          CountRun(job, r.run_start, r.ran, r.ran_on, event, event.state, &names, w);
      if (whole >= 0 && completions_count) completions.emplace_back(whole, r.milli);
      if (job::IsFinished(event.state)) runs.erase(event.job);
    }
    if (events->size() < kBatch || cursor >= last_seq) break;
  }
  for (auto& [id, entry] : jobs_) {
    auto it = runs.find(id);
    if (it != runs.end()) entry.ran = it->second.ran;
  }
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
    Result<Allocation> allocation = job::ToAllocation(entry.stored.status.allocation, state);
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
  // So do the finished jobs' sizes that a Gittins order learns from.
  if (state_) {
    for (Millis service : state_->finished_service())
      state.RecordFinishedService(service,
                                  static_cast<std::size_t>(config.engine.ordering.gittins_window));
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

Status Core::AppendLocked(std::vector<Event> events) {
  Result<std::vector<Event>> written = store_->Append(std::move(events));
  if (!written.ok()) return written.status();
  for (const Event& ev : *written) ApplyLocked(ev);
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
  metrics_.internal_errors.Increment();
  fmt::print(stderr,
             "error: internal: cannot {}: {} (memory may disagree with the store until the server "
             "restarts)\n",
             what, status.message());
}

void Core::ApplyLocked(const Event& event) {
  auto it = jobs_.find(event.job);
  if (it == jobs_.end()) return;
  Entry& entry = it->second;
  const JobState before = entry.stored.status.state;
  const bool was_finished = job::IsFinished(before);
  // The GPU model of the run this event may end (its service counts by the model); kNone if
  // unknown.
  GpuTypeId ran_on = kNone;
  if (state_ && !entry.stored.status.allocation.gpu_type.empty()) {
    if (const std::optional<GpuTypeId> type =
            state_->FindGpuType(entry.stored.status.allocation.gpu_type))
      ran_on = *type;
  }
  // The nodes it ran on and the nodes it runs on now: their agents are told.
  TouchNodesLocked(entry.stored.status.allocation);
  // The store has applied the same event to the same status: it cannot be refused here.
  Check(store::ApplyEvent(entry.stored.status, event), "apply a stored event");
  TouchNodesLocked(entry.stored.status.allocation);
  if (event.kind == EventKind::kStarted) {
    entry.reports.clear();
    RememberNodes(entry);
  }
  // Back to pending (evicted, requeued): the time it ran counts as its attained service and its
  // time on the model; completed: a Gittins order learns its size, all the GPU-time it ran.
  const Millis whole =
      CountRun(entry.job, entry.run_start, entry.ran, ran_on, event, entry.stored.status.state,
               state_ ? &*state_ : nullptr, config_.engine.ordering);
  // Pending again (evicted, requeued, released): its wait for admission starts now.
  if (event.kind != EventKind::kStarted && entry.stored.status.state == JobState::kPending &&
      before != JobState::kPending)
    entry.pending_since = event.time;
  if (!was_finished && job::IsFinished(entry.stored.status.state)) {
    if (whole >= 0 && state_)
      RecordCompletion(*state_, config_.engine.ordering, whole, entry.job.total_gpu().value());
    Finish(entry);
  }
}

void Core::RememberNodes(Entry& entry) {
  for (const job::StoredTask& t : entry.stored.status.allocation.tasks) {
    std::uint32_t rank = t.index;
    for (std::uint32_t g = 0; g < t.group && g < entry.stored.spec.groups.size(); ++g)
      rank += static_cast<std::uint32_t>(entry.stored.spec.groups[g].count);
    if (entry.last_nodes.size() <= rank) entry.last_nodes.resize(rank + 1);
    entry.last_nodes[rank] = t.node;
  }
}

void Core::Active::Add(const job::JobSpec& spec, int sign) {
  jobs += sign;
  for (const TaskGroup& g : spec.groups) gpu_milli += sign * g.count * g.request.gpu.value();
}

void Core::ReleaseActiveLocked(const job::JobSpec& spec) {
  auto it = active_.find(spec.user);
  if (it == active_.end()) return;
  it->second.Add(spec, -1);
  if (it->second.jobs <= 0) active_.erase(it);
}

void Core::Finish(Entry& entry) {
  entry.reason.clear();
  {
    std::lock_guard lock(inbox_mu_);
    ReleaseActiveLocked(entry.stored.spec);
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

}  // namespace arbiter::server
