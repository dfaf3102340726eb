// Arbiter's own job CSV (docs/traces.md): a header naming any of kJobFields; submit and duration
// are required.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "core/model/edit_distance.h"
#include "trace/csv.h"
#include "trace/readers.h"

namespace arbiter::trace::internal {
namespace {

constexpr std::int64_t kMaxMemoryMiB = limits::kMaxMemoryMiB;

}  // namespace

bool IsJobField(std::string_view name) {
  return std::find(std::begin(kJobFields), std::end(kJobFields), name) != std::end(kJobFields);
}

std::string UnknownField(std::string_view what, std::string_view name) {
  std::string message = "unknown " + std::string(what) + " " + Quote(name);
  std::string_view best;
  std::size_t best_distance = 3;  // suggest only close names
  for (std::string_view field : kJobFields) {
    const std::size_t distance = EditDistance(name, field);
    if (distance < best_distance) {
      best_distance = distance;
      best = field;
    }
  }
  if (!best.empty()) return message + " (did you mean " + Quote(best) + "?)";
  message += " (known: ";
  for (std::string_view field : kJobFields) {
    if (field != kJobFields[0]) message += ", ";
    message += field;
  }
  return message + ")";
}

std::string SetJobField(std::string_view name, std::string_view text, TraceJob* job) {
  text = Trim(text);
  if (name == "submit") return ParseSeconds(name, text, &job->submit);
  if (name == "duration") return ParseSeconds(name, text, &job->duration);
  if (text.empty()) return {};  // the default
  if (name == "name") {
    job->name = std::string(text);
  } else if (name == "queue") {
    job->queue = std::string(text);
  } else if (name == "user") {
    job->user = std::string(text);
  } else if (name == "priority_class") {
    job->priority_class = std::string(text);
  } else if (name == "kind") {
    job->kind = std::string(text);
  } else if (name == "tasks") {
    std::int64_t tasks = 0;
    std::string problem = ParseInt(name, text, 1, kMaxCount, &tasks);
    if (!problem.empty()) return problem;
    job->tasks = static_cast<std::int32_t>(tasks);
  } else if (name == "gpus") {
    std::int64_t milli = 0;
    std::string problem = ParseMilli(name, text, /*allow_milli_suffix=*/true, &milli);
    if (!problem.empty()) return problem;
    // The rule of every reader of jobs (job/limits.h).
    if (Status st = limits::CheckTaskGpus(name, milli); !st.ok()) return st.message();
    job->gpu_per_task = MilliGpu(milli);
  } else if (name == "cpu") {
    std::int64_t milli = 0;
    std::string problem = ParseMilli(name, text, /*allow_milli_suffix=*/true, &milli);
    if (!problem.empty()) return problem;
    job->cpu_per_task = MilliCpu(milli);
  } else if (name == "memory") {
    std::int64_t memory = 0;
    std::string problem = ParseInt(name, text, 0, kMaxMemoryMiB, &memory);
    if (!problem.empty()) return problem;
    job->memory_per_task = MemMiB(memory);
  } else if (name == "gpu_models") {
    job->gpu_models = SplitList(text);
  } else if (name == "checkpoint_interval") {
    return ParseSeconds(name, text, &job->checkpoint_interval);
  } else {
    return UnknownField("field", name);
  }
  return {};
}

Result<Trace> ReadArbiterCsv(std::string_view text, const std::string& file_name) {
  Result<CsvTable> table = ParseCsv(text, file_name);
  if (!table.ok()) return table.status();
  for (const std::string& column : table->header) {
    if (!IsJobField(column)) {
      return LineError(file_name, table->header_line, UnknownField("column", column));
    }
  }
  for (std::string_view required : {"submit", "duration"}) {
    Result<int> column = table->Require(required);
    if (!column.ok()) return column.status();
  }

  Trace trace;
  trace.bad_rows = std::move(table->bad_rows);
  for (const CsvRow& row : table->rows) {
    TraceJob job;
    job.line = row.line;
    std::string problem;
    for (std::size_t i = 0; i < row.fields.size() && problem.empty(); ++i) {
      problem = SetJobField(table->header[i], row.fields[i], &job);
    }
    if (!problem.empty()) {
      trace.bad_rows.push_back({row.line, std::move(problem)});
      continue;
    }
    if (job.name.empty()) job.name = "csv-" + std::to_string(row.line);
    trace.jobs.push_back(std::move(job));
  }
  return trace;
}

}  // namespace arbiter::trace::internal
