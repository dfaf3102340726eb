// The records of the store: names of the enums, checks of specs and events, the job state machine
// (ApplyEvent) that both stores share, and the sequence-number notification of Store.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <set>
#include <string>

#include "store/store.h"

namespace arbiter::store {
namespace {

constexpr std::array<const char*, 19> kEventKindNames = {"submitted",
                                                         "held",
                                                         "released",
                                                         "priority_changed",
                                                         "started",
                                                         "checkpointed",
                                                         "eviction_signalled",
                                                         "evicted",
                                                         "requeued",
                                                         "retried",
                                                         "completed",
                                                         "failed",
                                                         "cancelled",
                                                         "queue_quota_changed",
                                                         "node_cordoned",
                                                         "node_draining",
                                                         "node_uncordoned",
                                                         "node_ready",
                                                         "node_lost"};
constexpr std::array<const char*, 3> kNodeAdminStateNames = {"schedulable", "cordoned", "draining"};
static_assert(kEventKindNames.size() == static_cast<std::size_t>(EventKind::kNodeLost) + 1);

Status FieldError(std::string_view field, std::string problem) {
  return Status::InvalidArgument(std::move(problem), std::string(field));
}

Status NonNegative(std::string_view field, std::int64_t value) {
  if (value < 0) return FieldError(field, fmt::format("must not be negative, got {}", value));
  return Status::Ok();
}

}  // namespace

const char* EventKindName(EventKind kind) {
  return kEventKindNames[static_cast<std::size_t>(kind)];
}
std::optional<EventKind> ParseEventKind(std::string_view name) {
  for (std::size_t i = 0; i < kEventKindNames.size(); ++i) {
    if (name == kEventKindNames[i]) return static_cast<EventKind>(i);
  }
  return std::nullopt;
}
const char* NodeAdminStateName(NodeAdminState state) {
  return kNodeAdminStateNames[static_cast<std::size_t>(state)];
}

bool operator==(const JobStatus& a, const JobStatus& b) {
  return a.state == b.state && a.priority_class == b.priority_class &&
         a.allocation == b.allocation && a.start_time == b.start_time &&
         a.first_start_time == b.first_start_time && a.last_checkpoint == b.last_checkpoint &&
         a.stop_at == b.stop_at && a.evictions == b.evictions && a.retries == b.retries &&
         a.end_time == b.end_time && a.message == b.message;
}

bool operator==(const Event& a, const Event& b) {
  return a.seq == b.seq && a.time == b.time && a.kind == b.kind && a.job == b.job &&
         a.target == b.target && a.actor == b.actor && a.message == b.message &&
         a.priority_class == b.priority_class && a.allocation == b.allocation &&
         a.stop_at == b.stop_at && a.state == b.state;
}

Status ValidateEvent(const Event& e, std::string_view field) {
  const std::string f(field);
  if (!IsJobEvent(e.kind)) {
    return FieldError(f + ".kind", fmt::format("'{}' is recorded by the store's own operation, "
                                               "not appended",
                                               EventKindName(e.kind)));
  }
  if (e.kind == EventKind::kSubmitted) {
    return FieldError(f + ".kind", "'submitted' is recorded by Submit, not appended");
  }
  if (e.job == 0) return FieldError(f + ".job", "must be a job id");
  for (const auto& [name, text] : {std::pair<const char*, const std::string*>{"actor", &e.actor},
                                   {"message", &e.message},
                                   {"priority_class", &e.priority_class},
                                   {"target", &e.target},
                                   {"allocation.gpu_type", &e.allocation.gpu_type}}) {
    if (Status s = job::CheckUtf8(fmt::format("{}.{}", f, name), *text); !s.ok()) return s;
  }
  if (Status s = NonNegative(f + ".time", e.time); !s.ok()) return s;
  if (e.kind == EventKind::kPriorityChanged && e.priority_class.empty()) {
    return FieldError(f + ".priority_class", "must name the new priority class");
  }
  if (e.kind == EventKind::kStarted) {
    if (e.allocation.empty()) return FieldError(f + ".allocation", "must have at least one task");
    for (std::size_t i = 0; i < e.allocation.tasks.size(); ++i) {
      const std::string node = fmt::format("{}.allocation.tasks[{}].node", f, i);
      if (e.allocation.tasks[i].node.empty()) return FieldError(node, "must not be empty");
      if (Status s = job::CheckUtf8(node, e.allocation.tasks[i].node); !s.ok()) return s;
    }
  } else if (!e.allocation.empty()) {
    return FieldError(f + ".allocation", "only a 'started' event has an allocation");
  }
  if (e.kind == EventKind::kEvictionSignalled && e.stop_at < e.time) {
    return FieldError(f + ".stop_at", fmt::format("must not be before the event's time {}, got {}",
                                                  e.time, e.stop_at));
  }
  return Status::Ok();
}

Status ApplyEvent(JobStatus& status, const Event& e) {
  const job::JobState from = status.state;
  auto refuse = [&](std::string_view allowed) {
    return Status::Conflict(fmt::format("job is {}; {}", job::JobStateName(from), allowed));
  };
  const bool pending = from == job::JobState::kPending || from == job::JobState::kHeld;
  switch (e.kind) {
    case EventKind::kSubmitted:
      return Status::InvalidArgument("'submitted' is recorded by Submit only", "kind");
    case EventKind::kHeld:
      if (from != job::JobState::kPending) return refuse("only a pending job can be held");
      status.state = job::JobState::kHeld;
      return Status::Ok();
    case EventKind::kReleased:
      if (from != job::JobState::kHeld) return refuse("only a held job can be released");
      status.state = job::JobState::kPending;
      return Status::Ok();
    case EventKind::kPriorityChanged:
      if (job::IsFinished(from)) return refuse("a finished job keeps its priority class");
      status.priority_class = e.priority_class;
      return Status::Ok();
    case EventKind::kStarted:
      if (from != job::JobState::kPending) return refuse("only a pending job can start");
      status.state = job::JobState::kRunning;
      status.allocation = e.allocation;
      status.start_time = e.time;
      if (status.first_start_time < 0) status.first_start_time = e.time;
      status.stop_at = -1;
      return Status::Ok();
    case EventKind::kCheckpointed:
      if (from != job::JobState::kRunning) return refuse("only a running job checkpoints");
      status.last_checkpoint = e.time;
      return Status::Ok();
    case EventKind::kEvictionSignalled:
      if (from != job::JobState::kRunning) return refuse("only a running job can be evicted");
      status.stop_at = e.stop_at;
      return Status::Ok();
    case EventKind::kEvicted:
    case EventKind::kRequeued:
    case EventKind::kRetried:
      if (from != job::JobState::kRunning) {
        return refuse(e.kind == EventKind::kEvicted ? "only a running job can be evicted"
                                                    : "only a running job can be requeued");
      }
      status.state = job::JobState::kPending;
      status.allocation = {};
      status.stop_at = -1;
      if (e.kind == EventKind::kEvicted) status.evictions.push_back(e.time);
      if (e.kind == EventKind::kRetried) ++status.retries;
      return Status::Ok();
    case EventKind::kCompleted:
      if (from != job::JobState::kRunning) return refuse("only a running job can complete");
      break;
    case EventKind::kFailed:
    case EventKind::kCancelled:
      if (!pending && from != job::JobState::kRunning) return refuse("it has already finished");
      break;
    default:
      return Status::InvalidArgument(fmt::format("'{}' is not a job event", EventKindName(e.kind)),
                                     "kind");
  }
  // The finishing kinds.
  status.state = e.kind == EventKind::kCompleted ? job::JobState::kCompleted
                 : e.kind == EventKind::kFailed  ? job::JobState::kFailed
                                                 : job::JobState::kCancelled;
  status.allocation = {};
  status.stop_at = -1;
  status.end_time = e.time;
  status.message = e.message;
  return Status::Ok();
}

// ---- Store: the committed sequence number ----

std::uint64_t Store::LastSeq() const { return last_seq_.load(std::memory_order_acquire); }

void Store::SetCommitListener(std::function<void(std::span<const Event>)> listener) {
  listener_ = std::move(listener);
}

void Store::PublishEvents(std::span<const Event> events, std::uint64_t last_seq) {
  if (!events.empty()) last_seq = events.back().seq;
  if (!events.empty() && listener_) listener_(events);
  std::uint64_t seen = last_seq_.load(std::memory_order_relaxed);
  while (seen < last_seq &&
         !last_seq_.compare_exchange_weak(seen, last_seq, std::memory_order_release,
                                          std::memory_order_relaxed)) {
  }
}

void Store::SubmitAsync(job::JobSpec spec, std::function<void(Result<Submitted>)> done) {
  done(Submit(std::move(spec)));
}

Result<JobChanges> Store::JobsChangedSince(std::uint64_t seq) {
  constexpr std::size_t kPage = 10000;
  JobChanges out;
  out.last_seq = seq;
  std::set<JobId> ids;
  for (;;) {
    Result<std::vector<Event>> events = EventsSince(out.last_seq, kPage);
    if (!events.ok()) return events.status();
    for (const Event& e : *events) {
      if (e.job != 0) ids.insert(e.job);
      out.last_seq = e.seq;
    }
    if (events->size() < kPage) break;
  }
  // Read after the events: a job may have changed again since, and is then read as it is now,
  // which the next call reads again anyway.
  for (const JobId id : ids) {
    Result<std::optional<StoredJob>> job = GetJob(id);
    if (!job.ok()) return job.status();
    if (*job) out.jobs.push_back(std::move(**job));
  }
  return out;
}

}  // namespace arbiter::store
