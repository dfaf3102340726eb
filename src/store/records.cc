// The records of the store: names of the enums, checks of specs and events, the job state machine
// (ApplyEvent) that both stores share, and the sequence-number notification of Store.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <set>
#include <string>

#include "store/store.h"
#include "config/limits.h"
#include "store/codec.h"

namespace arbiter::store {
namespace {

constexpr std::array<const char*, 6> kJobStateNames = {"pending",   "held",   "running",
                                                       "completed", "failed", "cancelled"};
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

bool SameToleration(const Toleration& a, const Toleration& b) {
  return a.key == b.key && a.op == b.op && a.value == b.value && a.effect == b.effect;
}
bool SameGroup(const TaskGroup& a, const TaskGroup& b) {
  return a.name == b.name && a.count == b.count && a.request.gpu == b.request.gpu &&
         a.request.gpu_memory == b.request.gpu_memory && a.request.cpu == b.request.cpu &&
         a.request.memory == b.request.memory;
}
bool SameDevice(const DeviceShare& a, const DeviceShare& b) {
  return a.device == b.device && a.gpu == b.gpu && a.memory == b.memory;
}
bool SameTask(const StoredTask& a, const StoredTask& b) {
  return a.group == b.group && a.index == b.index && a.node == b.node && a.cpu == b.cpu &&
         a.memory == b.memory &&
         std::equal(a.devices.begin(), a.devices.end(), b.devices.begin(), b.devices.end(),
                    SameDevice);
}

Status FieldError(std::string_view field, std::string problem) {
  return Status::InvalidArgument(std::move(problem), std::string(field));
}

Status NonNegative(std::string_view field, std::int64_t value) {
  if (value < 0) return FieldError(field, fmt::format("must not be negative, got {}", value));
  return Status::Ok();
}

Status ValidateGroup(const TaskGroup& g, const std::string& f) {
  if (Status s = limits::CheckObjectName(f + ".name", g.name); !s.ok()) return s;
  if (Status s = limits::CheckCount(f + ".tasks", g.count, 1, limits::kMaxTasksPerJob); !s.ok()) {
    return s;
  }
  const std::int64_t gpu = g.request.gpu.value();
  if (Status s = limits::CheckTaskGpus(f + ".gpu_milli", gpu); !s.ok()) return s;
  if (Status s = limits::CheckCount(f + ".gpu_memory_mib", g.request.gpu_memory.value(), 0,
                                    limits::kMaxMemoryMiB);
      !s.ok()) {
    return s;
  }
  if (g.request.gpu_memory.value() > 0 && gpu == 0) {
    return FieldError(f + ".gpu_memory_mib",
                      "needs GPUs: GPU memory is asked per device of a task with GPUs");
  }
  if (Status s = limits::CheckCount(f + ".cpu_milli", g.request.cpu.value(), 0,
                                    limits::kMaxCpuMilliPerTask);
      !s.ok()) {
    return s;
  }
  return limits::CheckCount(f + ".memory_mib", g.request.memory.value(), 0, limits::kMaxMemoryMiB);
}

// A label map: at most kMaxLabels entries, keys and values as Kubernetes labels.
Status ValidateLabels(const std::string& field, const Labels& labels, bool required) {
  if (required && labels.empty()) return FieldError(field, "give at least one label to match");
  if (labels.size() > limits::kMaxLabels) {
    return FieldError(field,
                      fmt::format("at most {} labels, got {}", limits::kMaxLabels, labels.size()));
  }
  for (const auto& [key, value] : labels) {
    if (Status s = limits::CheckLabelKey(field, key); !s.ok()) return s;
    if (Status s = limits::CheckLabelValue(field + "." + key, value); !s.ok()) return s;
  }
  return Status::Ok();
}

Status Text(std::string_view field, std::string_view text) {
  if (!ValidUtf8(text)) return FieldError(field, "is not valid UTF-8");
  return Status::Ok();
}

Status TextMap(std::string_view field, const Labels& labels) {
  for (const auto& [k, v] : labels) {
    if (!ValidUtf8(k)) return FieldError(field, "has a key that is not valid UTF-8");
    if (Status s = Text(fmt::format("{}.{}", field, k), v); !s.ok()) return s;
  }
  return Status::Ok();
}

// Every text of the spec is UTF-8 (JSON text must be).
Status SpecTexts(const JobSpec& spec) {
  for (const auto& [field, text] : {std::pair<const char*, const std::string*>{"name", &spec.name},
                                    {"user", &spec.user},
                                    {"queue", &spec.queue},
                                    {"priority_class", &spec.priority_class},
                                    {"topology.level", &spec.topology_level},
                                    {"command", &spec.command},
                                    {"idempotency_key", &spec.idempotency_key}}) {
    if (Status s = Text(field, *text); !s.ok()) return s;
  }
  for (std::size_t i = 0; i < spec.groups.size(); ++i) {
    if (Status s = Text(fmt::format("groups[{}].name", i), spec.groups[i].name); !s.ok()) return s;
  }
  for (std::size_t i = 0; i < spec.gpu_types.size(); ++i) {
    if (Status s = Text(fmt::format("gpu_types[{}]", i), spec.gpu_types[i]); !s.ok()) return s;
  }
  if (Status s = TextMap("node_selector", spec.node_selector); !s.ok()) return s;
  if (Status s = TextMap("labels", spec.labels); !s.ok()) return s;
  if (Status s = TextMap("env", spec.env); !s.ok()) return s;
  for (std::size_t i = 0; i < spec.argv.size(); ++i) {
    if (Status s = Text(fmt::format("argv[{}]", i), spec.argv[i]); !s.ok()) return s;
  }
  for (std::size_t i = 0; i < spec.tolerations.size(); ++i) {
    if (Status s = Text(fmt::format("tolerations[{}].key", i), spec.tolerations[i].key); !s.ok()) {
      return s;
    }
    if (Status s = Text(fmt::format("tolerations[{}].value", i), spec.tolerations[i].value);
        !s.ok()) {
      return s;
    }
  }
  for (std::size_t i = 0; i < spec.affinity.size(); ++i) {
    if (Status s = TextMap(fmt::format("affinity[{}].match", i), spec.affinity[i].match); !s.ok()) {
      return s;
    }
    if (Status s = Text(fmt::format("affinity[{}].level", i), spec.affinity[i].level); !s.ok()) {
      return s;
    }
  }
  return Status::Ok();
}

}  // namespace

const char* JobStateName(JobState state) { return kJobStateNames[static_cast<std::size_t>(state)]; }
std::optional<JobState> ParseJobState(std::string_view name) {
  for (std::size_t i = 0; i < kJobStateNames.size(); ++i) {
    if (name == kJobStateNames[i]) return static_cast<JobState>(i);
  }
  return std::nullopt;
}
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

bool operator==(const JobSpec& a, const JobSpec& b) {
  auto same_affinity = [](const AffinitySpec& x, const AffinitySpec& y) {
    return x.match == y.match && x.level == y.level && x.anti == y.anti && x.required == y.required;
  };
  return a.name == b.name && a.user == b.user && a.queue == b.queue &&
         a.priority_class == b.priority_class &&
         std::equal(a.groups.begin(), a.groups.end(), b.groups.begin(), b.groups.end(),
                    SameGroup) &&
         a.gpu_types == b.gpu_types && a.topology_level == b.topology_level &&
         a.topology_mode == b.topology_mode && a.node_selector == b.node_selector &&
         std::equal(a.tolerations.begin(), a.tolerations.end(), b.tolerations.begin(),
                    b.tolerations.end(), SameToleration) &&
         a.labels == b.labels &&
         std::equal(a.affinity.begin(), a.affinity.end(), b.affinity.begin(), b.affinity.end(),
                    same_affinity) &&
         a.submit_time == b.submit_time && a.runtime_estimate == b.runtime_estimate &&
         a.checkpoint_interval == b.checkpoint_interval &&
         a.restart_overhead == b.restart_overhead && a.argv == b.argv && a.command == b.command &&
         a.env == b.env && a.max_retries == b.max_retries && a.idempotency_key == b.idempotency_key;
}

bool operator==(const StoredAllocation& a, const StoredAllocation& b) {
  return a.gpu_type == b.gpu_type &&
         std::equal(a.tasks.begin(), a.tasks.end(), b.tasks.begin(), b.tasks.end(), SameTask);
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

Status ValidateJobSpec(const JobSpec& spec) {
  if (Status s = SpecTexts(spec); !s.ok()) return s;
  if (Status s = limits::CheckObjectName("name", spec.name); !s.ok()) return s;
  if (Status s = limits::CheckName("user", spec.user, false); !s.ok()) return s;
  if (Status s = limits::CheckName("queue", spec.queue, true); !s.ok()) return s;
  if (Status s = limits::CheckName("priority_class", spec.priority_class, true); !s.ok()) return s;
  if (spec.groups.empty()) return FieldError("groups", "give at least one task group");
  if (spec.groups.size() > limits::kMaxGroups) {
    return FieldError("groups", fmt::format("at most {} task groups, got {}", limits::kMaxGroups,
                                            spec.groups.size()));
  }
  std::set<std::string> group_names;
  std::int64_t tasks = 0;
  for (std::size_t i = 0; i < spec.groups.size(); ++i) {
    const std::string f = fmt::format("groups[{}]", i);
    if (Status s = ValidateGroup(spec.groups[i], f); !s.ok()) return s;
    if (!group_names.insert(spec.groups[i].name).second) {
      return FieldError(f + ".name", fmt::format("duplicate group name '{}'", spec.groups[i].name));
    }
    tasks += spec.groups[i].count;
  }
  if (tasks > limits::kMaxTasksPerJob) {
    return FieldError(
        "groups", fmt::format("at most {} tasks in a job, got {}", limits::kMaxTasksPerJob, tasks));
  }
  if (spec.gpu_types.size() > kMaxGpuTypes) {
    return FieldError("gpu_types", fmt::format("at most {} GPU types, got {}", kMaxGpuTypes,
                                               spec.gpu_types.size()));
  }
  for (std::size_t i = 0; i < spec.gpu_types.size(); ++i) {
    if (Status s = limits::CheckName(fmt::format("gpu_types[{}]", i), spec.gpu_types[i], true);
        !s.ok()) {
      return s;
    }
  }
  if (Status s = limits::CheckName("topology.level", spec.topology_level, false); !s.ok()) return s;
  if (Status s = ValidateLabels("node_selector", spec.node_selector, false); !s.ok()) return s;
  if (Status s = ValidateLabels("labels", spec.labels, false); !s.ok()) return s;
  if (spec.tolerations.size() > limits::kMaxTolerations) {
    return FieldError("tolerations", fmt::format("at most {} tolerations, got {}",
                                                 limits::kMaxTolerations, spec.tolerations.size()));
  }
  for (std::size_t i = 0; i < spec.tolerations.size(); ++i) {
    const Toleration& t = spec.tolerations[i];
    const std::string f = fmt::format("tolerations[{}]", i);
    if (!t.key.empty()) {
      if (Status s = limits::CheckLabelKey(f + ".key", t.key); !s.ok()) return s;
    }
    if (Status s = limits::CheckLabelValue(f + ".value", t.value); !s.ok()) return s;
    if (t.op == Toleration::Op::kExists && !t.value.empty()) {
      return FieldError(f + ".value", "operator Exists matches any value; leave 'value' out");
    }
    if (t.op == Toleration::Op::kEqual && t.key.empty()) {
      return FieldError(f + ".key",
                        "operator Equal needs a key (an empty key with operator "
                        "Exists tolerates all)");
    }
  }
  if (spec.affinity.size() > limits::kMaxAffinityTerms) {
    return FieldError("affinity", fmt::format("at most {} terms, got {}", limits::kMaxAffinityTerms,
                                              spec.affinity.size()));
  }
  for (std::size_t i = 0; i < spec.affinity.size(); ++i) {
    const std::string f = fmt::format("affinity[{}]", i);
    if (Status s = ValidateLabels(f + ".match", spec.affinity[i].match, true); !s.ok()) return s;
    if (Status s = limits::CheckName(f + ".level", spec.affinity[i].level, true); !s.ok()) {
      return s;
    }
  }
  if (!spec.argv.empty() && !spec.command.empty()) {
    return FieldError("argv",
                      "give either argv (no shell) or command (run by /bin/sh -c), "
                      "not both");
  }
  if (!spec.argv.empty() && spec.argv[0].empty()) {
    return FieldError("argv[0]", "must name the program to run");
  }
  if (spec.argv.size() > limits::kMaxArgs) {
    return FieldError(
        "argv", fmt::format("at most {} arguments, got {}", limits::kMaxArgs, spec.argv.size()));
  }
  if (spec.env.size() > limits::kMaxEnv) {
    return FieldError(
        "env", fmt::format("at most {} variables, got {}", limits::kMaxEnv, spec.env.size()));
  }
  // What a task runs may span lines (a shell script), but holds no other control character.
  constexpr std::string_view kLines = "\t\n\r";
  std::size_t command_bytes = spec.command.size();
  if (Status s = limits::CheckText("command", spec.command, limits::kMaxCommandBytes, kLines);
      !s.ok()) {
    return s;
  }
  for (std::size_t i = 0; i < spec.argv.size(); ++i) {
    const std::string& a = spec.argv[i];
    if (Status s =
            limits::CheckText(fmt::format("argv[{}]", i), a, limits::kMaxCommandBytes, kLines);
        !s.ok()) {
      return s;
    }
    command_bytes += a.size() + 1;
  }
  for (const auto& [name, value] : spec.env) {
    if (name.empty() || name.find('=') != std::string::npos ||
        limits::FindUnprintable(name) != std::string_view::npos) {
      return FieldError("env",
                        "a variable's name must be non-empty, without '=' or control characters");
    }
    if (Status s =
            limits::CheckText(fmt::format("env.{}", name), value, limits::kMaxCommandBytes, kLines);
        !s.ok()) {
      return s;
    }
    command_bytes += name.size() + value.size() + 2;
  }
  if (command_bytes > limits::kMaxCommandBytes) {
    return FieldError(spec.argv.empty() && spec.env.empty() ? "command" : "argv",
                      fmt::format("argv, command and env together must be at most {} bytes, "
                                  "got {}",
                                  limits::kMaxCommandBytes, command_bytes));
  }
  if (Status s = limits::CheckCount("max_retries", spec.max_retries, 0, limits::kMaxRetries);
      !s.ok()) {
    return s;
  }
  if (spec.topology_level.empty() && spec.topology_mode == ConstraintMode::kPreferred) {
    return FieldError("topology.level", "must be given with mode preferred");
  }
  if (!spec.topology_level.empty() && spec.topology_mode == ConstraintMode::kUnconstrained) {
    return FieldError("topology.mode", "must be required or preferred");
  }
  if (Status s = limits::CheckTime("submit_time_ms", spec.submit_time); !s.ok()) return s;
  if (Status s = limits::CheckDuration("runtime_estimate_ms", spec.runtime_estimate); !s.ok()) {
    return s;
  }
  if (Status s = limits::CheckDuration("checkpoint_interval_ms", spec.checkpoint_interval);
      !s.ok()) {
    return s;
  }
  if (Status s = limits::CheckDuration("restart_overhead_ms", spec.restart_overhead); !s.ok()) {
    return s;
  }
  return limits::CheckName("idempotency_key", spec.idempotency_key, false);
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
    if (Status s = Text(fmt::format("{}.{}", f, name), *text); !s.ok()) return s;
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
      if (Status s = Text(node, e.allocation.tasks[i].node); !s.ok()) return s;
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
  const JobState from = status.state;
  auto refuse = [&](std::string_view allowed) {
    return Status::Conflict(fmt::format("job is {}; {}", JobStateName(from), allowed));
  };
  const bool pending = from == JobState::kPending || from == JobState::kHeld;
  switch (e.kind) {
    case EventKind::kSubmitted:
      return Status::InvalidArgument("'submitted' is recorded by Submit only", "kind");
    case EventKind::kHeld:
      if (from != JobState::kPending) return refuse("only a pending job can be held");
      status.state = JobState::kHeld;
      return Status::Ok();
    case EventKind::kReleased:
      if (from != JobState::kHeld) return refuse("only a held job can be released");
      status.state = JobState::kPending;
      return Status::Ok();
    case EventKind::kPriorityChanged:
      if (IsFinished(from)) return refuse("a finished job keeps its priority class");
      status.priority_class = e.priority_class;
      return Status::Ok();
    case EventKind::kStarted:
      if (from != JobState::kPending) return refuse("only a pending job can start");
      status.state = JobState::kRunning;
      status.allocation = e.allocation;
      status.start_time = e.time;
      if (status.first_start_time < 0) status.first_start_time = e.time;
      status.stop_at = -1;
      return Status::Ok();
    case EventKind::kCheckpointed:
      if (from != JobState::kRunning) return refuse("only a running job checkpoints");
      status.last_checkpoint = e.time;
      return Status::Ok();
    case EventKind::kEvictionSignalled:
      if (from != JobState::kRunning) return refuse("only a running job can be evicted");
      status.stop_at = e.stop_at;
      return Status::Ok();
    case EventKind::kEvicted:
    case EventKind::kRequeued:
    case EventKind::kRetried:
      if (from != JobState::kRunning) {
        return refuse(e.kind == EventKind::kEvicted ? "only a running job can be evicted"
                                                    : "only a running job can be requeued");
      }
      status.state = JobState::kPending;
      status.allocation = {};
      status.stop_at = -1;
      if (e.kind == EventKind::kEvicted) status.evictions.push_back(e.time);
      if (e.kind == EventKind::kRetried) ++status.retries;
      return Status::Ok();
    case EventKind::kCompleted:
      if (from != JobState::kRunning) return refuse("only a running job can complete");
      break;
    case EventKind::kFailed:
    case EventKind::kCancelled:
      if (!pending && from != JobState::kRunning) return refuse("it has already finished");
      break;
    default:
      return Status::InvalidArgument(fmt::format("'{}' is not a job event", EventKindName(e.kind)),
                                     "kind");
  }
  // The finishing kinds.
  status.state = e.kind == EventKind::kCompleted ? JobState::kCompleted
                 : e.kind == EventKind::kFailed  ? JobState::kFailed
                                                 : JobState::kCancelled;
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

void Store::SubmitAsync(JobSpec spec, std::function<void(Result<Submitted>)> done) {
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
