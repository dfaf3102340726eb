// Alibaba PAI 2020 (cluster-trace-gpu-v2020): the task table, one job per task, joined with the
// job table for users and submission times. Upstream files have no header line; the columns are
// then those of kPaiTaskColumns and kPaiJobColumns.
#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "trace/csv.h"
#include "trace/readers.h"

namespace arbiter::trace::internal {
namespace {

// A percent ("50.0": half a unit) as thousandths of the unit, rounded up to the next thousandth.
std::string ParsePercent(std::string_view column, std::string_view text, std::int64_t* out) {
  std::int64_t thousandths_of_percent = 0;
  std::string problem = ParseSeconds(column, text, &thousandths_of_percent);  // exact decimal
  if (!problem.empty()) return problem;
  *out = (thousandths_of_percent + 99) / 100;  // percent x 10 = thousandths of the unit
  return {};
}

// GiB ("29.296875") as MiB, rounded up; exact for a plain decimal of up to 12 decimals, which
// thousandths would not be (upstream's amounts are fractions of 1024 MiB).
std::string ParseGibAsMib(std::string_view column, std::string_view text, std::int64_t* out) {
  const std::size_t point = text.find('.');
  const std::string_view whole = text.substr(0, point);
  const std::string_view fraction =
      point == std::string_view::npos ? std::string_view() : text.substr(point + 1);
  const auto digits = [](std::string_view part) {
    return part.find_first_not_of("0123456789") == std::string_view::npos;
  };
  if (whole.empty() || whole.size() > 9 || fraction.size() > 12 || !digits(whole) ||
      !digits(fraction)) {
    // Anything else (an exponent, a sign, a huge amount): thousandths of a GiB, checked as usual.
    std::int64_t thousandths = 0;
    std::string problem = ParseSeconds(column, text, &thousandths);
    if (!problem.empty()) return problem;
    if (thousandths > limits::kMaxMemoryMiB)
      return std::string(column) + ": out of range: " + Quote(text);
    *out = (thousandths * 1024 + 999) / 1000;
    return {};
  }
  std::int64_t scale = 1, numerator = 0;
  for (char c : fraction) {
    numerator = numerator * 10 + (c - '0');
    scale *= 10;
  }
  std::int64_t gib = 0;
  for (char c : whole) gib = gib * 10 + (c - '0');
  // numerator / scale < 1, times 1024 < 1024 x 10^12: no overflow.
  *out = gib * 1024 + (numerator * 1024 + scale - 1) / scale;
  return {};
}

// A PAI job: who submitted it and when.
struct PaiJob {
  std::string user;
  Millis submit = 0;
  std::string problem;  // not empty: the job table's row was bad
};

std::vector<std::string> Columns(std::span<const std::string_view> names) {
  return {names.begin(), names.end()};
}

// The job table: job_name -> its user and submission time. A bad row is kept as a problem, which
// the tasks of that job then report.
Result<std::unordered_map<std::string, PaiJob>> ReadPaiJobs(std::string_view text,
                                                            const std::string& file_name) {
  const std::vector<std::string> implicit = Columns(kPaiJobColumns);
  Result<CsvTable> table = ParseCsv(text, file_name, ',', &implicit);
  if (!table.ok()) return table.status();
  Result<int> job_name = table->Require("job_name");
  if (!job_name.ok()) return job_name.status();
  Result<int> start_time = table->Require("start_time");
  if (!start_time.ok()) return start_time.status();
  const int user = table->Column("user");

  // A row that cannot be split into its columns has no job_name to join: the read fails, as a
  // job missing from the table would silently change its tasks.
  if (!table->bad_rows.empty()) {
    const BadRow& bad = table->bad_rows.front();
    return LineError(file_name, bad.line, bad.problem);
  }
  std::unordered_map<std::string, PaiJob> jobs;
  const std::string where = file_name.substr(file_name.find_last_of('/') + 1);
  for (const CsvRow& row : table->rows) {
    PaiJob job;
    std::string problem = ParseSeconds("start_time", row.fields[*start_time], &job.submit);
    if (!problem.empty()) {
      job.problem = "job_name: the job's row in " + where + " (line " + std::to_string(row.line) +
                    ") is bad: " + problem;
    }
    if (user >= 0) job.user = row.fields[user];
    jobs.emplace(row.fields[*job_name], std::move(job));  // the first row of a job counts
  }
  return jobs;
}

}  // namespace

Result<Trace> ReadPai(std::string_view task_text, const std::string& task_file_name,
                      std::string_view job_text, const std::string& job_file_name,
                      const ReadOptions& options) {
  (void)options;
  const std::vector<std::string> implicit = Columns(kPaiTaskColumns);
  Result<CsvTable> table = ParseCsv(task_text, task_file_name, ',', &implicit);
  if (!table.ok()) return table.status();
  if (table->Column("task_name") < 0 && table->Column("inst_id") >= 0) {
    return LineError(task_file_name, table->header_line,
                     "this is PAI's job table: read the task table (pai_task_table.csv) with the "
                     "job table beside it as pai_job_table.csv, or the folder holding both");
  }
  int columns[6] = {};
  constexpr const char* kRequired[6] = {"job_name",   "task_name", "inst_num",
                                        "start_time", "end_time",  "plan_gpu"};
  for (int i = 0; i < 6; ++i) {
    Result<int> column = table->Require(kRequired[i]);
    if (!column.ok()) return column.status();
    columns[i] = *column;
  }
  const auto [job_name, task_name, inst_num, start_time, end_time, plan_gpu] = columns;
  const int status = table->Column("status");
  const int plan_cpu = table->Column("plan_cpu");
  const int plan_mem = table->Column("plan_mem");
  const int gpu_type = table->Column("gpu_type");

  const bool joined = !job_text.empty();
  std::unordered_map<std::string, PaiJob> jobs;
  if (joined) {
    Result<std::unordered_map<std::string, PaiJob>> read = ReadPaiJobs(job_text, job_file_name);
    if (!read.ok()) return read.status();
    jobs = std::move(*read);
  }

  Trace trace;
  trace.bad_rows = std::move(table->bad_rows);
  for (const CsvRow& row : table->rows) {
    const auto field = [&row](int column) -> const std::string& { return row.fields[column]; };
    const std::string state = status >= 0 ? field(status) : std::string();
    if (state == "Waiting") {
      Skip(&trace, "never started (status Waiting)", row.line);
      continue;
    }
    if (state == "Running") {
      Skip(&trace, "still running when the trace ends (status Running)", row.line);
      continue;
    }
    TraceJob job;
    job.line = row.line;
    std::string problem;
    if (field(job_name).empty()) problem = "job_name: empty";
    if (problem.empty() && field(task_name).empty()) problem = "task_name: empty";
    if (problem.empty()) job.name = field(job_name) + "/" + field(task_name);
    std::int64_t instances = 0, gpu = 0, cpu = 0, memory = 0;
    Millis started = 0, ended = 0;
    if (problem.empty()) problem = ParseInt("inst_num", field(inst_num), 1, kMaxCount, &instances);
    if (problem.empty()) problem = ParseSeconds("start_time", field(start_time), &started);
    if (problem.empty()) problem = ParseSeconds("end_time", field(end_time), &ended);
    if (problem.empty() && ended < started) {
      problem = "end_time: before start_time: " + Quote(field(end_time));
    }
    // An empty plan is none of it (upstream leaves plan_gpu empty for CPU tasks).
    if (problem.empty() && !field(plan_gpu).empty()) {
      problem = ParsePercent("plan_gpu", field(plan_gpu), &gpu);
    }
    if (problem.empty() && plan_cpu >= 0 && !field(plan_cpu).empty()) {
      problem = ParsePercent("plan_cpu", field(plan_cpu), &cpu);
    }
    if (problem.empty() && plan_mem >= 0 && !field(plan_mem).empty()) {
      problem = ParseGibAsMib("plan_mem", field(plan_mem), &memory);
    }
    if (problem.empty() && joined) {
      const auto it = jobs.find(field(job_name));
      if (it == jobs.end()) {
        problem = "job_name: not in the job table: " + Quote(field(job_name));
      } else if (!it->second.problem.empty()) {
        problem = it->second.problem;
      } else {
        job.user = it->second.user;
        job.submit = it->second.submit;
      }
    }
    if (!problem.empty()) {
      trace.bad_rows.push_back({row.line, std::move(problem)});
      continue;
    }
    if (!joined) job.submit = started;
    job.duration = ended - started;
    job.tasks = static_cast<std::int32_t>(instances);
    // A share of one GPU stays a share; above one GPU, whole GPUs (rounded up).
    if (gpu > kMilliPerGpu) gpu = (gpu + kMilliPerGpu - 1) / kMilliPerGpu * kMilliPerGpu;
    job.gpu_per_task = MilliGpu(gpu);
    job.cpu_per_task = MilliCpu(cpu);
    job.memory_per_task = MemMiB(memory);
    if (gpu > 0 && gpu_type >= 0 && !field(gpu_type).empty()) {
      job.gpu_models.push_back(field(gpu_type));
    }
    trace.jobs.push_back(std::move(job));
  }
  return trace;
}

}  // namespace arbiter::trace::internal
