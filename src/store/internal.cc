#include "store/internal.h"

#include <fmt/format.h>

#include "store/codec.h"

namespace arbiter::store::internal {

Status ValidateSpecs(const std::vector<JobSpec>& specs, bool batch) {
  if (batch && specs.empty()) return Status::Error("jobs: give at least one job");
  for (std::size_t i = 0; i < specs.size(); ++i) {
    Status s = ValidateJobSpec(specs[i]);
    if (!s.ok()) {
      if (!batch) return s;
      return Status::Error(fmt::format("jobs[{}].{}", i, s.message()));
    }
  }
  return Status::Ok();
}

Status ValidateEvents(const std::vector<Event>& events) {
  if (events.empty()) return Status::Error("events: give at least one event");
  for (std::size_t i = 0; i < events.size(); ++i) {
    if (Status s = ValidateEvent(events[i], fmt::format("events[{}]", i)); !s.ok()) return s;
  }
  return Status::Ok();
}

Status EventError(std::size_t index, const Event& event, std::string_view problem) {
  return Status::Error(fmt::format("events[{}] (job {}, {}): {}", index, event.job,
                                   EventKindName(event.kind), problem));
}

Status ValidateQuota(const QueueQuotaOverride& q) {
  if (q.queue.empty()) return Status::Error("queue: must not be empty");
  if (!ValidUtf8(q.queue)) return Status::Error("queue: is not valid UTF-8");
  if (!ValidUtf8(q.actor)) return Status::Error("actor: is not valid UTF-8");
  if (q.time < 0) return Status::Error(fmt::format("time: must not be negative, got {}", q.time));
  for (const auto& [resource, spec] : q.quota) {
    if (resource.empty()) return Status::Error("quota: a resource name must not be empty");
    if (!ValidUtf8(resource)) return Status::Error("quota: a resource name is not valid UTF-8");
    auto check = [&](const char* field, const std::optional<MilliGpu>& v) {
      if (v && v->value() < 0) {
        return Status::Error(
            fmt::format("quota.{}.{}: must not be negative, got {}", resource, field, v->value()));
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
  if (node.node.empty()) return Status::Error("node: must not be empty");
  for (const auto& [field, text] : {std::pair<const char*, const std::string*>{"node", &node.node},
                                    {"reason", &node.reason},
                                    {"actor", &node.actor}}) {
    if (!ValidUtf8(*text)) return Status::Error(fmt::format("{}: is not valid UTF-8", field));
  }
  if (node.time < 0) {
    return Status::Error(fmt::format("time: must not be negative, got {}", node.time));
  }
  return Status::Ok();
}

JobStatus NewStatus(const JobSpec& spec) {
  JobStatus status;
  status.priority_class = spec.priority_class;
  return status;
}

Event SubmittedEvent(const JobSpec& spec) {
  Event e;
  e.time = spec.submit_time;
  e.kind = EventKind::kSubmitted;
  e.actor = spec.user;
  e.state = JobState::kPending;
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
