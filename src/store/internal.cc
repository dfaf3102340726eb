#include "store/internal.h"

#include <fmt/format.h>

#include "store/codec.h"

namespace arbiter::store::internal {

Status ValidateSubmission(const job::JobSpec& spec) {
  if (spec.user.empty())
    return Status::InvalidArgument("must not be empty (the submitter)", "user");
  return job::ValidateJobSpec(spec);
}

Status ValidateSpecs(const std::vector<job::JobSpec>& specs, bool batch) {
  if (batch && specs.empty()) return Status::InvalidArgument("give at least one job", "jobs");
  for (std::size_t i = 0; i < specs.size(); ++i) {
    Status s = ValidateSubmission(specs[i]);
    if (!s.ok()) {
      if (!batch) return s;
      return std::move(s).InField(fmt::format("jobs[{}]", i));
    }
  }
  return Status::Ok();
}

Status ValidateEvents(const std::vector<Event>& events) {
  if (events.empty()) return Status::InvalidArgument("give at least one event", "events");
  for (std::size_t i = 0; i < events.size(); ++i) {
    if (Status s = ValidateEvent(events[i], fmt::format("events[{}]", i)); !s.ok()) return s;
  }
  return Status::Ok();
}

Status EventError(std::size_t index, const Event& event, std::string_view problem) {
  // A transition the job's state does not allow: the input contradicts the stored state.
  return Status::Conflict(
      fmt::format("job {} ({}): {}", event.job, EventKindName(event.kind), problem),
      fmt::format("events[{}]", index));
}

Status ValidateQuota(const QueueQuotaOverride& q) {
  if (q.queue.empty()) return Status::InvalidArgument("must not be empty", "queue");
  if (!job::ValidUtf8(q.queue)) return Status::InvalidArgument("is not valid UTF-8", "queue");
  if (!job::ValidUtf8(q.actor)) return Status::InvalidArgument("is not valid UTF-8", "actor");
  if (q.time < 0) {
    return Status::InvalidArgument(fmt::format("must not be negative, got {}", q.time), "time");
  }
  for (const auto& [resource, spec] : q.quota) {
    if (resource.empty()) {
      return Status::InvalidArgument("a resource name must not be empty", "quota");
    }
    if (!job::ValidUtf8(resource)) {
      return Status::InvalidArgument("a resource name is not valid UTF-8", "quota");
    }
    // (A structured binding is not captured: clang before 16, which make tidy uses, refuses it.)
    auto check = [&, &name = resource](const char* field, const std::optional<MilliGpu>& v) {
      if (v && v->value() < 0) {
        return Status::InvalidArgument(fmt::format("must not be negative, got {}", v->value()),
                                       fmt::format("quota.{}.{}", name, field));
      }
      return Status::Ok();
    };
    if (Status s = check("nominal_milli", spec.nominal); !s.ok()) return s;
    if (Status s = check("borrowing_limit_milli", spec.borrowing_limit); !s.ok()) return s;
    if (Status s = check("lending_limit_milli", spec.lending_limit); !s.ok()) return s;
    if (Status s = check("max_milli", spec.max); !s.ok()) return s;
  }
  return Status::Ok();
}

Status ValidateNode(const NodeAdmin& node) {
  if (node.node.empty()) return Status::InvalidArgument("must not be empty", "node");
  for (const auto& [field, text] : {std::pair<const char*, const std::string*>{"node", &node.node},
                                    {"reason", &node.reason},
                                    {"actor", &node.actor}}) {
    if (!job::ValidUtf8(*text)) return Status::InvalidArgument("is not valid UTF-8", field);
  }
  if (node.time < 0) {
    return Status::InvalidArgument(fmt::format("must not be negative, got {}", node.time), "time");
  }
  return Status::Ok();
}

Status ValidateNodeHealth(const std::vector<Event>& events) {
  if (events.empty()) return Status::InvalidArgument("give at least one event", "events");
  for (std::size_t i = 0; i < events.size(); ++i) {
    const Event& e = events[i];
    const std::string field = fmt::format("events[{}]", i);
    if (e.kind != EventKind::kNodeReady && e.kind != EventKind::kNodeLost) {
      return Status::InvalidArgument(
          fmt::format("must be node_ready or node_lost, got '{}'", EventKindName(e.kind)),
          field + ".kind");
    }
    if (e.job != 0) return Status::InvalidArgument("a node's event names no job", field + ".job");
    Status s = ValidateNode({e.target, NodeAdminState::kSchedulable, e.message, e.time, e.actor});
    if (!s.ok()) {
      const std::string name = s.field() == "node"     ? "target"
                               : s.field() == "reason" ? "message"
                                                       : s.field();
      return Status::InvalidArgument(s.message(), field + "." + name);
    }
  }
  return Status::Ok();
}

JobStatus NewStatus(const job::JobSpec& spec) {
  JobStatus status;
  status.priority_class = spec.priority_class;
  return status;
}

Event SubmittedEvent(const job::JobSpec& spec) {
  Event e;
  e.time = spec.submit_time;
  e.kind = EventKind::kSubmitted;
  e.actor = spec.user;
  e.state = job::JobState::kPending;
  return e;
}

Event QuotaEvent(const QueueQuotaOverride& q) {
  Event e;
  e.time = q.time;
  e.kind = EventKind::kQueueQuotaChanged;
  e.target = q.queue;
  e.actor = q.actor;
  e.message = Dump(QuotaToJson(q.quota));
  return e;
}

Event QuotaResetEvent(const std::string& queue, Millis time, const std::string& actor) {
  Event e;
  e.time = time;
  e.kind = EventKind::kQueueQuotaChanged;
  e.target = queue;
  e.actor = actor;
  e.message = "reset to the configuration";
  return e;
}

Event NodeEvent(const NodeAdmin& node) {
  Event e;
  e.time = node.time;
  e.kind = node.state == NodeAdminState::kCordoned   ? EventKind::kNodeCordoned
           : node.state == NodeAdminState::kDraining ? EventKind::kNodeDraining
                                                     : EventKind::kNodeUncordoned;
  e.target = node.node;
  e.actor = node.actor;
  e.message = node.reason;
  return e;
}

}  // namespace arbiter::store::internal
