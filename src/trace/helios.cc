// SenseTime Helios job logs (cluster_log.csv of each cluster): job_id,user,vc,gpu_num,cpu_num,
// node_num,state,submit_time,start_time,end_time,duration,queue.
#include <algorithm>
#include <array>
#include <cstdint>
#include <string>

#include "trace/csv.h"
#include "trace/readers.h"

namespace arbiter::trace::internal {
namespace {

// The states a Helios job ends in (its README): every one ran, CANCELLED perhaps not at all.
constexpr std::array<std::string_view, 6> kStates = {"COMPLETED", "CANCELLED", "FAILED",
                                                     "TIMEOUT",   "NODE_FAIL", "SUSPENDED"};

}  // namespace

Result<Trace> ReadHelios(std::string_view text, const std::string& file_name,
                         const ReadOptions& options) {
  Result<CsvTable> table = ParseCsv(text, file_name);
  if (!table.ok()) return table.status();
  Result<int> gpu_num = table->Require("gpu_num");
  if (!gpu_num.ok()) return gpu_num.status();
  Result<int> submit_time = table->Require("submit_time");
  if (!submit_time.ok()) return submit_time.status();
  const int job_id = table->Column("job_id");
  const int user = table->Column("user");
  const int vc = table->Column("vc");
  const int cpu_num = table->Column("cpu_num");
  const int node_num = table->Column("node_num");
  const int state = table->Column("state");
  const int start_time = table->Column("start_time");
  const int end_time = table->Column("end_time");
  const int duration = table->Column("duration");
  if (duration < 0 && (start_time < 0 || end_time < 0)) {
    return LineError(file_name, table->header_line,
                     "missing column \"duration\" (or both \"start_time\" and \"end_time\")");
  }

  Trace trace;
  trace.bad_rows = std::move(table->bad_rows);
  for (const CsvRow& row : table->rows) {
    const auto field = [&row](int column) -> const std::string& { return row.fields[column]; };
    TraceJob job;
    job.line = row.line;
    job.name = job_id >= 0 ? field(job_id) : std::string();
    if (job.name.empty()) job.name = "helios-" + std::to_string(row.line);
    std::string problem;
    const std::string end_state = state >= 0 ? field(state) : std::string();
    if (state >= 0 && std::find(kStates.begin(), kStates.end(), end_state) == kStates.end()) {
      problem = "state: unknown state " + Quote(end_state) +
                " (COMPLETED, CANCELLED, FAILED, TIMEOUT, NODE_FAIL or SUSPENDED)";
    }
    std::int64_t gpus = 0, cpus = 0, nodes = 0;
    if (problem.empty()) problem = ParseInt("gpu_num", field(*gpu_num), 0, kMaxCount, &gpus);
    if (problem.empty() && cpu_num >= 0 && !field(cpu_num).empty()) {
      problem = ParseInt("cpu_num", field(cpu_num), 0, kMaxCount, &cpus);
    }
    if (problem.empty() && node_num >= 0 && !field(node_num).empty()) {
      problem = ParseInt("node_num", field(node_num), 0, kMaxCount, &nodes);
    }
    if (problem.empty() && !ParseUtcTimestamp(field(*submit_time), &job.submit)) {
      problem = TimestampProblem("submit_time", field(*submit_time));
    }
    if (problem.empty()) {
      if (duration >= 0) {
        problem = ParseSeconds("duration", field(duration), &job.duration);
      } else {
        Millis started = 0, ended = 0;
        if (!ParseUtcTimestamp(field(start_time), &started)) {
          problem = TimestampProblem("start_time", field(start_time));
        } else if (!ParseUtcTimestamp(field(end_time), &ended)) {
          problem = TimestampProblem("end_time", field(end_time));
        } else if (ended < started) {
          problem = "end_time: before start_time: " + Quote(field(end_time));
        } else {
          job.duration = ended - started;
        }
      }
    }
    if (!problem.empty()) {
      trace.bad_rows.push_back({row.line, std::move(problem)});
      continue;
    }
    if (end_state == "CANCELLED" && job.duration == 0) {
      Skip(&trace, "cancelled before it ran (state CANCELLED, duration 0)", row.line);
      continue;
    }
    SplitGpus(gpus, nodes, options, &job);
    if (cpus > 0) job.cpu_per_task = MilliCpu((cpus * 1000 + job.tasks - 1) / job.tasks);
    if (user >= 0) job.user = field(user);
    if (vc >= 0) job.queue = field(vc);
    trace.jobs.push_back(std::move(job));
  }
  return trace;
}

}  // namespace arbiter::trace::internal
