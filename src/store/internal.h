// What the two stores share: the checks of each call's input and the events of the operators'
// changes, so that both answer the same way.
#pragma once

#include <string>
#include <vector>

#include "store/store.h"

namespace arbiter::store::internal {

// What Submit takes: a spec that ValidateJobSpec accepts, with its submitter (user) set.
Status ValidateSubmission(const job::JobSpec& spec);
// ValidateSubmission of each spec; in a batch the errors' fields are prefixed "jobs[i].".
Status ValidateSpecs(const std::vector<job::JobSpec>& specs, bool batch);
// ValidateEvent of each event, "events[i]".
Status ValidateEvents(const std::vector<Event>& events);
// A conflict naming the field "events[i]": "events[i]: job N (started): PROBLEM".
Status EventError(std::size_t index, const Event& event, std::string_view problem);

Status ValidateQuota(const QueueQuotaOverride& quota);
Status ValidateNode(const NodeAdmin& node);
// kNodeReady or kNodeLost events, each naming its node (RecordNodeHealth): "events[i].kind".
Status ValidateNodeHealth(const std::vector<Event>& events);

// A new job's status and its kSubmitted event (seq and job unset).
JobStatus NewStatus(const job::JobSpec& spec);
Event SubmittedEvent(const job::JobSpec& spec);
// The events of the operators' changes (seq unset).
Event QuotaEvent(const QueueQuotaOverride& quota);
Event QuotaResetEvent(const std::string& queue, Millis time, const std::string& actor);
Event NodeEvent(const NodeAdmin& node);

}  // namespace arbiter::store::internal
