// Tiresias: job_id,num_gpu,submit_time,iterations,model_name,duration,interval (seconds).
#include <cstdint>
#include <string>

#include "trace/csv.h"
#include "trace/readers.h"

namespace arbiter::trace::internal {

Result<Trace> ReadTiresias(std::string_view text, const std::string& file_name,
                           const ReadOptions& options) {
  Result<CsvTable> table = ParseCsv(text, file_name);
  if (!table.ok()) return table.status();
  Result<int> job_id = table->Require("job_id");
  if (!job_id.ok()) return job_id.status();
  Result<int> num_gpu = table->Require("num_gpu");
  if (!num_gpu.ok()) return num_gpu.status();
  Result<int> submit_time = table->Require("submit_time");
  if (!submit_time.ok()) return submit_time.status();
  Result<int> duration = table->Require("duration");
  if (!duration.ok()) return duration.status();

  Trace trace;
  trace.bad_rows = std::move(table->bad_rows);
  for (const CsvRow& row : table->rows) {
    TraceJob job;
    job.line = row.line;
    job.name = row.fields[*job_id];
    if (job.name.empty()) job.name = "tiresias-" + std::to_string(row.line);
    std::int64_t gpus = 0;
    std::string problem = ParseInt("num_gpu", row.fields[*num_gpu], 1, kMaxCount, &gpus);
    if (problem.empty()) {
      problem = ParseSeconds("submit_time", row.fields[*submit_time], &job.submit);
    }
    if (problem.empty()) problem = ParseSeconds("duration", row.fields[*duration], &job.duration);
    if (!problem.empty()) {
      trace.bad_rows.push_back({row.line, std::move(problem)});
      continue;
    }
    SplitGpus(gpus, 0, options, &job);
    trace.jobs.push_back(std::move(job));
  }
  return trace;
}

}  // namespace arbiter::trace::internal
