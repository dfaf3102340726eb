// The job service: submit, list, get, cancel, priority changes and holds. A submission is
// checked against the empty cluster under its own lock, committed, and left in the inbox for the
// loop (core.h); the other calls take mu_.
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <optional>
#include <span>

#include "job/limits.h"
#include "job/names.h"
#include "job/resolve.h"
#include "server/core.h"
#include "store/codec.h"

namespace arbiter::server {
namespace {

using Json = nlohmann::json;
using job::JobState;
using store::Event;
using store::EventKind;
using Role = config::TokenSpec::Role;

// The id of the probe job a submission is checked with (never a stored id).
constexpr JobId kProbeId = std::numeric_limits<JobId>::max();

std::string Join(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

void Core::Submit(const Caller& caller, std::string_view body, std::function<void(Answer)> done) {
  if (Status refused = Admit(caller, body, done); !refused.ok()) done(std::move(refused));
}

Status Core::Admit(const Caller& caller, std::string_view body, std::function<void(Answer)>& done) {
  const auto t0 = std::chrono::steady_clock::now();
  if (caller.role == Role::kAgent) {
    return Status::PermissionDenied("an agent token may not submit jobs");
  }
  if (caller.viewer()) {
    return Status::PermissionDenied(
        fmt::format("{} has the role viewer, which may not submit jobs (read only)", caller.name));
  }
  // The job pipeline of every reader of jobs: the JSON reader, the validator (the limits of
  // job/limits.h), the resolver.
  Result<job::JobSpec> spec = store::DecodeJobSpec(body);
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
  if (Status st = job::ValidateJobSpec(*spec); !st.ok()) return st;
  if (agents() && spec->argv.empty() && spec->command.empty()) {
    return Status::InvalidArgument(
        "the nodes' agents run each task: give argv (a program and its arguments) or command (a "
        "shell command)",
        "argv");
  }
  Job job;
  {
    std::lock_guard lock(probe_mu_);
    Result<Job> resolved = job::ToJob(kProbeId, *spec, *probe_);
    if (!resolved.ok()) return std::move(resolved).status();
    job = std::move(resolved).value();
    if (caller.role == Role::kUser &&
        std::find(caller.queues.begin(), caller.queues.end(), spec->queue) == caller.queues.end()) {
      return Status::PermissionDenied(
          fmt::format("{} may not submit to queue '{}' (allowed: {})", caller.name, spec->queue,
                      caller.queues.empty() ? "none" : Join(caller.queues)),
          "queue");
    }
    if (!caller.MayUseClass(spec->priority_class)) {
      return Status::PermissionDenied(
          fmt::format("{} may not give a job the priority class '{}' (allowed: {})", caller.name,
                      spec->priority_class, Join(caller.priority_classes)),
          "priority_class");
    }
    // A job that could never fit is refused now rather than left pending forever: one cycle
    // over this job alone on the configured cluster with nothing running places it, or says
    // why not and whether waiting could ever help (Verdict::kNever).
    const Plan probe =
        probe_engine_.Schedule(*probe_, std::span<const Job>(&job, 1), spec->submit_time);
    for (const Unplaced& u : probe.unplaced) {
      if (u.reason.verdict != Verdict::kNever) continue;
      const char* field = u.reason.stage == Stage::kQuota ? "queue" : "groups";
      return Status::InvalidArgument(u.reason.Describe(TimeStyle::kCalendar), field);
    }
  }
  {
    std::lock_guard lock(inbox_mu_);
    const std::int64_t limit = base_.server.max_active_jobs_per_user;
    const std::int64_t gpu_limit = base_.server.max_active_gpu_milli_per_user;
    Active& active = active_[spec->user];
    Active with = active;
    with.Add(*spec, 1);
    // Valid, but more than the user's share now: it may be taken once jobs finish.
    if (limit > 0 && with.jobs > limit) {
      return Status::Conflict(fmt::format("{} has {} pending, held or running jobs, the most "
                                          "allowed (server.max_active_jobs_per_user)",
                                          spec->user, active.jobs),
                              "user");
    }
    if (gpu_limit > 0 && with.gpu_milli > gpu_limit) {
      return Status::Conflict(
          fmt::format("{}'s pending, held and running jobs ask {} GPUs; this one's {} more would "
                      "pass the {} allowed (server.max_active_gpus_per_user)",
                      spec->user, limits::FormatGpus(active.gpu_milli),
                      limits::FormatGpus(with.gpu_milli - active.gpu_milli),
                      limits::FormatGpus(gpu_limit)),
          "user");
    }
    active = with;  // reserved while the store commits
  }
  // Committed by the store's writer with other submissions (group commit); the rest runs on
  // its thread once committed.
  auto accepted = std::make_shared<std::pair<job::JobSpec, Job>>(*spec, std::move(job));
  store_->SubmitAsync(std::move(spec).value(), [this, accepted, t0, done = std::move(done)](
                                                   Result<store::Submitted> submitted) {
    done(Committed(std::move(accepted->first), std::move(accepted->second), submitted, t0));
  });
  return Status::Ok();
}

Answer Core::Committed(job::JobSpec spec, Job job, const Result<store::Submitted>& submitted,
                       std::chrono::steady_clock::time_point t0) {
  std::lock_guard lock(inbox_mu_);
  if (!submitted.ok() || submitted->duplicate) {
    ReleaseActiveLocked(spec);
    if (!submitted.ok()) return Status(submitted.status()).WithContext("store: ");
    return Answer(Json{{"id", submitted->id}, {"duplicate", true}});
  }
  const JobId id = submitted->id;
  const std::string name = spec.name;
  Entry entry;
  entry.stored.id = id;
  entry.stored.status.priority_class = spec.priority_class;
  entry.stored.spec = std::move(spec);
  job.id = id;
  entry.job = std::move(job);
  const bool wake = inbox_.empty() && loop_waits_for_inbox_;
  inbox_.push_back(std::move(entry));
  if (wake) cv_.notify_one();
  metrics_.submitted.Increment();
  ObserveSince(metrics_.submit_seconds, t0);
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
    if (entry.reserved_start >= 0) {
      out["reserved_start_ms"] = entry.reserved_start;
      out["reserved_start"] = FormatTime(entry.reserved_start, TimeStyle::kCalendar);
    }
  }
  if (state == JobState::kRunning) {
    Json tasks = Json::array();
    Result<Allocation> allocation = job::ToAllocation(entry.stored.status.allocation, *state_);
    if (allocation.ok()) {
      for (const TaskAllocation& t : allocation->tasks) tasks.push_back(state_->Describe(t));
    }
    out["tasks"] = std::move(tasks);
    if (auto it = draining_.find(entry.stored.id); it != draining_.end()) {
      out["reason"] =
          fmt::format("evicted: stopping by {}", FormatTime(it->second, TimeStyle::kCalendar));
    }
  }
  return out;
}

Answer Core::ListJobs(const JobFilter& filter) {
  const std::uint64_t cursor = feed_->last_seq();  // first, as in ListQueues
  std::lock_guard lock(mu_);
  DrainInboxLocked();
  auto holds = [](const auto& list, const auto& value) {
    return list.empty() || std::find(list.begin(), list.end(), value) != list.end();
  };
  Json jobs = Json::array();
  bool truncated = false;  // another job matches after the last one listed
  for (const auto& [id, entry] : jobs_) {
    const store::StoredJob& s = entry.stored;
    if (!holds(filter.queues, s.spec.queue) || !holds(filter.users, s.spec.user) ||
        !holds(filter.states, s.status.state))
      continue;
    if (jobs.size() >= filter.limit) {
      truncated = true;
      break;
    }
    jobs.push_back(JobJson(entry));
  }
  Json answer{{"jobs", std::move(jobs)}, {"limit", filter.limit}, {"cursor", cursor}};
  if (truncated) answer["truncated"] = true;
  // Just after a restart or a takeover, until the recent finished jobs are read again.
  if (!recent_loaded_) answer["partial"] = true;
  return Answer(std::move(answer));
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
  Changes lock(*this);
  Entry* entry = FindLocked(id);
  if (!entry) return Status::NotFound(fmt::format("no active job {}", id), "job");
  if (Answer a = CheckOwner(caller, *entry, "cancel"); !a.ok()) return a;
  const JobState from = entry->stored.status.state;
  if (job::IsFinished(from)) {
    return Status::Conflict(fmt::format("job {} is already {}", id, job::JobStateName(from)));
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
  Changes lock(*this);
  Entry* entry = FindLocked(id);
  if (!entry) return Status::NotFound(fmt::format("no active job {}", id), "job");
  if (Answer a = CheckOwner(caller, *entry, "change the priority of"); !a.ok()) return a;
  std::optional<PriorityClassId> pc = state_->FindPriorityClass(priority_class);
  if (!pc) {
    std::vector<std::string> known;
    for (PriorityClassId c = 0; c < state_->priority_class_count(); ++c)
      known.push_back(state_->priority_class(c).name);
    return Status::NotFound(job::UnknownName("priority class", priority_class, known),
                            "priority_class");
  }
  // The one rule of submission: the classes the caller's token may use (Caller::MayUseClass).
  if (!caller.MayUseClass(priority_class)) {
    return Status::PermissionDenied(
        fmt::format("{} may not give a job the priority class '{}' (allowed: {})", caller.name,
                    priority_class, Join(caller.priority_classes)),
        "priority_class");
  }
  if (job::IsFinished(entry->stored.status.state)) {
    return Status::Conflict(
        fmt::format("job {} is already {}", id, job::JobStateName(entry->stored.status.state)));
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
  Changes lock(*this);
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
                                        job::JobStateName(entry->stored.status.state),
                                        job::JobStateName(want), hold ? "held" : "released"));
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

}  // namespace arbiter::server
