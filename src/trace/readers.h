// Internal to the trace readers: one reader per format. ReadTrace picks one by format; each
// returns its jobs unsorted with absolute submit times, and ReadTrace finishes the trace
// (internal::Finish).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "arbiter/status.h"
#include "trace/trace.h"

namespace arbiter::trace::internal {

Result<Trace> ReadPhilly(std::string_view text, const std::string& file_name,
                         const ReadOptions& options);
Result<Trace> ReadTiresias(std::string_view text, const std::string& file_name,
                           const ReadOptions& options);
Result<Trace> ReadOpenbPods(std::string_view text, const std::string& file_name);
Result<Trace> ReadArbiterCsv(std::string_view text, const std::string& file_name);
Result<Trace> ReadArbiterJson(std::string_view text, const std::string& file_name);
// pai: the task table, joined with the job table when `job_text` is not empty.
Result<Trace> ReadPai(std::string_view task_text, const std::string& task_file_name,
                      std::string_view job_text, const std::string& job_file_name,
                      const ReadOptions& options);
Result<Trace> ReadHelios(std::string_view text, const std::string& file_name,
                         const ReadOptions& options);
Result<Trace> ReadSwf(std::string_view text, const std::string& file_name,
                      const ReadOptions& options);
Result<Trace> ReadSacct(std::string_view text, const std::string& file_name,
                        const ReadOptions& options);

// The columns of PAI 2020's task and job tables, in the order of the upstream files (which have
// no header line).
inline constexpr std::string_view kPaiTaskColumns[] = {
    "job_name", "task_name", "inst_num", "status",   "start_time",
    "end_time", "plan_cpu",  "plan_mem", "plan_gpu", "gpu_type"};
inline constexpr std::string_view kPaiJobColumns[] = {"job_name", "inst_id",    "user",
                                                      "status",   "start_time", "end_time"};

// Philly's "YYYY-MM-DD HH:MM:SS" (UTC; a 'T' may separate date and time) as milliseconds since
// the Unix epoch; false when the text is not such a date and time.
bool ParseUtcTimestamp(std::string_view text, Millis* out);
// A problem for a timestamp column that ParseUtcTimestamp refused: `column: empty` or
// `column: not a date and time (YYYY-MM-DD HH:MM:SS): "text"`.
std::string TimestampProblem(std::string_view column, std::string_view text);

}  // namespace arbiter::trace::internal

namespace arbiter::trace::internal {

// The fields of Arbiter's own CSV columns and JSON job objects.
inline constexpr std::string_view kJobFields[] = {
    "name",  "submit", "duration", "queue",  "user",       "priority_class",     "kind",
    "tasks", "gpus",   "cpu",      "memory", "gpu_models", "checkpoint_interval"};

bool IsJobField(std::string_view name);
// `unknown column "gpu" (did you mean "gpus"?)`; `what` is "column" or "field".
std::string UnknownField(std::string_view what, std::string_view name);
// Sets job field `name` from its text (as a CSV cell holds it); an empty text keeps the default
// except for the required submit and duration. Returns the problem, or empty.
std::string SetJobField(std::string_view name, std::string_view text, TraceJob* job);

}  // namespace arbiter::trace::internal
