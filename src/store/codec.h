// JSON for the store's records: how the SQLite store keeps a job's spec and allocation, and a
// form the server can reuse in its API. Decoding is strict: unknown fields, wrong types and
// fractional numbers are errors naming the field (`groups[0].tasks: must be an integer, got
// "two"`); `path` prefixes every name (e.g. "jobs[3]"). Semantic checks are ValidateJobSpec's.
//
// Quantities are integers in the model's units, with the unit in the name: gpu_milli (1000 = one
// device), gpu_memory_mib, cpu_milli, memory_mib; times are milliseconds, *_ms. Defaults (empty,
// zero) are left out when encoding.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "arbiter/status.h"
#include "store/store.h"

namespace arbiter::store {

// A job spec:
//   {"name", "user", "queue", "priority_class",
//    "groups": [{"name", "tasks", "gpu_milli", "gpu_memory_mib", "cpu_milli", "memory_mib"}],
//    "gpu_types": [..], "topology": {"level", "mode": "required" | "preferred"},
//    "node_selector": {..}, "labels": {..},
//    "tolerations": [{"key", "operator": "Equal" | "Exists", "value",
//                     "effect": "NoSchedule" | "PreferNoSchedule"}],
//    "affinity": [{"match": {..}, "level", "anti", "required"}],
//    "submit_time_ms", "runtime_estimate_ms", "checkpoint_interval_ms", "restart_overhead_ms",
//    "command", "idempotency_key"}
// name, queue, priority_class and groups are required; a group's name defaults to "main" when it
// is the only group, else "group-K"; tasks defaults to 1.
nlohmann::json JobSpecToJson(const job::JobSpec& spec);
Result<job::JobSpec> JobSpecFromJson(const nlohmann::json& json, std::string_view path = "");

// {"gpu_type", "tasks": [{"group", "index", "node", "cpu_milli", "memory_mib",
//                         "devices": [{"device", "gpu_milli", "gpu_memory_mib"}]}]}
// A device's gpu_milli defaults to 1000 (the whole device).
nlohmann::json AllocationToJson(const job::StoredAllocation& allocation);
Result<job::StoredAllocation> AllocationFromJson(const nlohmann::json& json,
                                                 std::string_view path = "");

// {"state", "priority_class", "allocation", "start_time_ms", "first_start_time_ms",
//  "last_checkpoint_ms", "stop_at_ms", "evictions_ms": [..], "end_time_ms", "message"}
nlohmann::json JobStatusToJson(const JobStatus& status);
Result<JobStatus> JobStatusFromJson(const nlohmann::json& json, std::string_view path = "");

// {"id", "spec": {..}, "status": {..}}
nlohmann::json StoredJobToJson(const StoredJob& job);

// {"seq", "time_ms", "kind", "job", "target", "actor", "message", "priority_class",
//  "allocation", "stop_at_ms", "state"} ("state" only for job events).
nlohmann::json EventToJson(const Event& event);
Result<Event> EventFromJson(const nlohmann::json& json, std::string_view path = "");

// {"H800": {"nominal_milli", "borrowing_limit_milli", "lending_limit_milli", "max_milli"}, ..}
nlohmann::json QuotaToJson(const std::map<std::string, QuotaSpec>& quota);
Result<std::map<std::string, QuotaSpec>> QuotaFromJson(const nlohmann::json& json,
                                                       std::string_view path = "");

// Text forms, decoded in one pass without building a JSON document (the *FromJson functions
// above go through them). A malformed text is an error giving the byte (1-based), e.g.
// "malformed JSON at byte 14: expected a field name".
std::string EncodeJobSpec(const job::JobSpec& spec);
Result<job::JobSpec> DecodeJobSpec(std::string_view text, std::string_view path = "");
Result<job::StoredAllocation> DecodeAllocation(std::string_view text, std::string_view path = "");
// Into an existing (empty) record, without moving it: for loading many.
Status DecodeJobSpecInto(std::string_view text, job::JobSpec& out, std::string_view path = "");
Status DecodeAllocationInto(std::string_view text, job::StoredAllocation& out,
                            std::string_view path = "");
Result<JobStatus> DecodeJobStatus(std::string_view text, std::string_view path = "");
Result<Event> DecodeEvent(std::string_view text, std::string_view path = "");
Result<std::map<std::string, QuotaSpec>> DecodeQuota(std::string_view text,
                                                     std::string_view path = "");
// A list of integers, e.g. "[1,2,3]".
Result<std::vector<Millis>> DecodeMillisList(std::string_view text, std::string_view path = "");

// A value's compact text. Never throws: bytes that are not UTF-8 become U+FFFD (nlohmann's
// plain dump() throws on them).
std::string Dump(const nlohmann::json& json);

// A JSON document (nlohmann's parser), for callers that want one.
Result<nlohmann::json> ParseJson(std::string_view text, std::string_view path = "");

}  // namespace arbiter::store
