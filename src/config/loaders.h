// Internal to the configuration loader: the cluster and job loaders for other documents (the
// simulator's scenarios embed a cluster and job templates).
#pragma once

#include <functional>
#include <span>
#include <string_view>

#include "arbiter/model.h"
#include "config/config.h"
#include "config/reader.h"
#include "core/state/cluster_state.h"
#include "job/spec.h"

namespace arbiter::config::internal {

// A cluster document (the root of a cluster file, or a scenario's `cluster`).
ClusterConfig LoadClusterValue(const Value& root);

// A job template of a simulator workload: a jobs-file entry without name, submit_time,
// runtime_estimate and replicas (the generator gives those). Names resolve against `state`.
// `bare_memory`, when given, receives its memory fields written as bare numbers (for lint).
Job LoadJobTemplate(const Value& item, const ClusterState& state,
                    std::vector<BareMemory>* bare_memory = nullptr);

// A memory size (Value::MiB), noted in `bare` (when given) if written as a bare number.
std::int64_t MemoryMiB(const Value& v, BareMemory::Kind kind, std::vector<BareMemory>* bare);

// A job entry of another document (a snapshot's jobs): a jobs-file entry without `replicas`, whose
// `submit_time` is read by `read_time`, with the fields `extra` allowed besides (the caller reads
// them). Checked and resolved as a jobs file's job, with id `id`; `spec` gets the spec as read.
Job LoadJobEntry(const Value& item, std::span<const std::string_view> extra,
                 const std::function<Millis(const Value&)>& read_time, const ClusterState& state,
                 JobId id, job::JobSpec& spec);

}  // namespace arbiter::config::internal
