// Slurm `sacct --parsable2` output: '|'-separated fields under a header of field names (JobID,
// Submit, Start, End, Elapsed, State, AllocTRES, ...). One job a line for the allocation, one per
// step (read and skipped).
#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "trace/csv.h"
#include "trace/readers.h"

namespace arbiter::trace::internal {
namespace {

// The base states of the man page's JOB STATE CODES.
constexpr std::array<std::string_view, 15> kStates = {
    "BOOT_FAIL", "CANCELLED",     "COMPLETED", "DEADLINE",  "FAILED",
    "NODE_FAIL", "OUT_OF_MEMORY", "PENDING",   "PREEMPTED", "RUNNING",
    "REQUEUED",  "RESIZING",      "REVOKED",   "SUSPENDED", "TIMEOUT"};
// States of jobs that have not ended: nothing to replay yet.
constexpr std::array<std::string_view, 5> kUnfinished = {"PENDING", "RUNNING", "REQUEUED",
                                                         "RESIZING", "SUSPENDED"};

constexpr const char* kNoJobId =
    "missing column \"JobID\" (for output written with --noheader, add its --format fields as "
    "the first line, '|'-separated)";

bool IsUnset(std::string_view time) {
  return time.empty() || time == "Unknown" || time == "None" || time == "N/A";
}

// Elapsed: [DD-[HH:]]MM:SS, seconds perhaps with a fraction.
std::string ParseElapsed(std::string_view column, std::string_view text, Millis* out) {
  const std::string bad =
      std::string(column) + ": not a duration ([DD-[HH:]]MM:SS): " + Quote(text);
  if (text.empty()) return std::string(column) + ": empty";
  std::int64_t days = 0;
  std::string_view rest = text;
  if (const std::size_t dash = rest.find('-'); dash != std::string_view::npos) {
    if (!ParseInt(column, rest.substr(0, dash), 0, kMaxSeconds / 86400, &days).empty()) return bad;
    rest.remove_prefix(dash + 1);
  }
  std::vector<std::string_view> parts;
  while (true) {
    const std::size_t colon = rest.find(':');
    parts.push_back(rest.substr(0, colon));
    if (colon == std::string_view::npos) break;
    rest.remove_prefix(colon + 1);
  }
  if (parts.size() < 2 || parts.size() > 3 || (days > 0 && parts.size() != 3)) return bad;
  std::int64_t hours = 0, minutes = 0;
  Millis seconds = 0;
  if (parts.size() == 3 &&
      !ParseInt(column, parts[0], 0, days > 0 ? 23 : kMaxSeconds / 3600, &hours).empty()) {
    return bad;
  }
  const std::size_t m = parts.size() - 2;
  if (!ParseInt(column, parts[m], 0, parts.size() == 3 ? 59 : kMaxSeconds / 60, &minutes).empty() ||
      !ParseSeconds(column, parts[m + 1], &seconds).empty() || seconds >= 60 * kMillisPerSecond) {
    return bad;
  }
  *out = ((days * 24 + hours) * 60 + minutes) * 60 * kMillisPerSecond + seconds;
  return {};
}

// A memory amount with an optional unit (K, M, G, T; none: M) as MiB, rounded up.
bool ParseMemory(std::string_view text, std::int64_t* mib) {
  std::int64_t scale_num = 1, scale_den = 1;  // MiB = value * num / den
  if (!text.empty()) {
    switch (text.back()) {
      case 'K':
        scale_den = 1024;
        break;
      case 'M':
        break;
      case 'G':
        scale_num = 1024;
        break;
      case 'T':
        scale_num = 1024 * 1024;
        break;
      default:
        scale_num = 0;  // no unit
    }
    if (scale_num != 0) {
      text.remove_suffix(1);
    } else {
      scale_num = 1;
    }
  }
  std::int64_t thousandths = 0;
  if (!ParseSeconds("memory", text, &thousandths).empty()) return false;
  if (thousandths > limits::kMaxMemoryMiB * 1000 / scale_num) return false;
  const std::int64_t den = 1000 * scale_den;
  *mib = (thousandths * scale_num + den - 1) / den;
  return true;
}

// What a TRES list (cpu=24,mem=336000M,node=1,gres/gpu=2,gres/gpu:a100=2) gives.
struct Tres {
  std::int64_t cpus = -1, memory = -1, nodes = -1, gpus = -1;
  std::int64_t typed_gpus = 0;
  std::vector<std::string> gpu_types;
};

std::string ParseTres(std::string_view column, std::string_view text, Tres* out) {
  Tres tres;
  while (!text.empty()) {
    const std::size_t comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    text.remove_prefix(comma == std::string_view::npos ? text.size() : comma + 1);
    const std::size_t equals = item.find('=');
    if (equals == std::string_view::npos) {
      return std::string(column) + ": not a TRES list (name=count,...): " + Quote(item);
    }
    const std::string_view key = item.substr(0, equals), count = item.substr(equals + 1);
    std::string problem;
    if (key == "cpu") {
      problem = ParseInt(std::string(column) + " cpu", count, 0, kMaxCount, &tres.cpus);
    } else if (key == "node") {
      problem = ParseInt(std::string(column) + " node", count, 0, kMaxCount, &tres.nodes);
    } else if (key == "mem") {
      if (!ParseMemory(count, &tres.memory)) {
        problem = std::string(column) + " mem: not an amount of memory: " + Quote(count);
      }
    } else if (key == "gres/gpu") {
      problem = ParseInt(std::string(column) + " gres/gpu", count, 0, kMaxCount, &tres.gpus);
    } else if (key.substr(0, 9) == "gres/gpu:") {
      std::int64_t gpus = 0;
      problem = ParseInt(std::string(column) + " " + std::string(key), count, 0, kMaxCount, &gpus);
      tres.typed_gpus += gpus;
      tres.gpu_types.emplace_back(key.substr(9));
    }
    if (!problem.empty()) return problem;
  }
  if (tres.gpus < 0 && !tres.gpu_types.empty()) tres.gpus = tres.typed_gpus;
  *out = std::move(tres);
  return {};
}

// GRES (AllocGRES, ReqGRES: gpu:2, gpu:a100:2, gpu:a100:2(IDX:0-1)): the GPUs and their type.
std::string ParseGres(std::string_view column, std::string_view text, Tres* out) {
  while (!text.empty()) {
    const std::size_t comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    text.remove_prefix(comma == std::string_view::npos ? text.size() : comma + 1);
    item = item.substr(0, item.find('('));
    if (item.substr(0, 4) != "gpu:" && item != "gpu") continue;
    std::string_view rest = item.size() > 4 ? item.substr(4) : std::string_view("1");
    const std::size_t colon = rest.rfind(':');
    std::int64_t gpus = 0;
    std::string problem =
        ParseInt(column, colon == std::string_view::npos ? rest : rest.substr(colon + 1), 0,
                 kMaxCount, &gpus);
    if (!problem.empty()) return problem;
    out->gpus = std::max<std::int64_t>(out->gpus, 0) + gpus;
    if (colon != std::string_view::npos) out->gpu_types.emplace_back(rest.substr(0, colon));
  }
  return {};
}

}  // namespace

Result<Trace> ReadSacct(std::string_view text, const std::string& file_name,
                        const ReadOptions& options) {
  // `-p` (not -P) ends every line with a separator: drop it when the first line has one.
  std::string stripped;
  {
    const std::size_t first = text.find_first_not_of(" \t\r\n");
    const std::string_view first_line =
        first == std::string_view::npos ? std::string_view()
                                        : Trim(text.substr(first, text.find('\n', first) - first));
    if (!first_line.empty() && first_line.back() == '|') {
      std::string_view rest = text;
      while (!rest.empty()) {
        const std::size_t newline = rest.find('\n');
        std::string_view line = rest.substr(0, newline);
        rest.remove_prefix(newline == std::string_view::npos ? rest.size() : newline + 1);
        while (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        if (!line.empty() && line.back() == '|') line.remove_suffix(1);
        stripped += line;
        stripped += '\n';
      }
      text = stripped;
    }
  }
  if (options.sacct_columns.empty()) {
    // Output written with --noheader has values where the names should be: say so before the
    // header's checks (a value given twice, an empty one) speak of column names.
    std::string_view rest = text;
    if (rest.substr(0, 3) == "\xEF\xBB\xBF") rest.remove_prefix(3);
    std::int64_t line_number = 1;
    while (!rest.empty() && Trim(rest.substr(0, rest.find('\n'))).empty()) {
      const std::size_t newline = rest.find('\n');
      rest.remove_prefix(newline == std::string_view::npos ? rest.size() : newline + 1);
      ++line_number;
    }
    std::vector<std::string> fields;
    if (!rest.empty() && (!SplitCsvLine(Trim(rest.substr(0, rest.find('\n'))), &fields, '|') ||
                          (std::find(fields.begin(), fields.end(), "JobID") == fields.end() &&
                           std::find(fields.begin(), fields.end(), "JobIDRaw") == fields.end()))) {
      return LineError(file_name, line_number, kNoJobId);
    }
  }
  Result<CsvTable> table = ParseCsv(
      text, file_name, '|', options.sacct_columns.empty() ? nullptr : &options.sacct_columns);
  if (!table.ok()) return table.status();
  const auto either = [&](std::string_view a, std::string_view b) {
    const int column = table->Column(a);
    return column >= 0 ? column : table->Column(b);
  };
  const int job_id = either("JobID", "JobIDRaw");
  if (job_id < 0) return LineError(file_name, table->header_line, kNoJobId);
  int columns[3] = {};
  constexpr const char* kRequired[3] = {"Submit", "Start", "End"};
  for (int i = 0; i < 3; ++i) {
    Result<int> column = table->Require(kRequired[i]);
    if (!column.ok()) return column.status();
    columns[i] = *column;
  }
  const auto [submit, start, end] = columns;
  const int elapsed = table->Column("Elapsed");
  const int state = table->Column("State");
  const int user = table->Column("User");
  const int partition = table->Column("Partition");
  const int alloc_tres = table->Column("AllocTRES");
  const int req_tres = table->Column("ReqTRES");
  const int alloc_gres = table->Column("AllocGRES");
  const int req_gres = table->Column("ReqGRES");
  const int alloc_cpus = either("AllocCPUS", "NCPUS");
  const int req_cpus = table->Column("ReqCPUS");
  const int alloc_nodes = either("AllocNodes", "NNodes");
  const int req_nodes = table->Column("ReqNodes");
  const int req_mem = table->Column("ReqMem");

  Trace trace;
  trace.bad_rows = std::move(table->bad_rows);
  for (const CsvRow& row : table->rows) {
    const auto field = [&row](int column) -> std::string_view {
      return column >= 0 ? std::string_view(row.fields[column]) : std::string_view();
    };
    const std::string_view id = field(job_id);
    if (id.find('.') != std::string_view::npos) {
      Skip(&trace, "job steps (the job's own line is read)", row.line);
      continue;
    }
    std::string problem;
    if (id.empty()) problem = "JobID: empty";
    // State: a base state, perhaps with detail ("CANCELLED by 1000") or a '+' (requeued).
    std::string base_state;
    if (problem.empty() && state >= 0) {
      base_state = std::string(field(state).substr(0, field(state).find(' ')));
      if (!base_state.empty() && base_state.back() == '+') base_state.pop_back();
      if (base_state.empty()) {
        problem = "State: empty";
      } else if (std::find(kStates.begin(), kStates.end(), base_state) == kStates.end()) {
        problem = "State: unknown state " + Quote(field(state));
      }
    }
    if (problem.empty() &&
        std::find(kUnfinished.begin(), kUnfinished.end(), base_state) != kUnfinished.end()) {
      Skip(&trace, "not ended (State " + base_state + ")", row.line);
      continue;
    }
    if (problem.empty() && IsUnset(field(start))) {
      Skip(&trace,
           "never started (Start Unknown" + (base_state.empty() ? "" : ", State " + base_state) +
               ")",
           row.line);
      continue;
    }
    if (problem.empty() && IsUnset(field(end))) {
      Skip(&trace, "no end time (End Unknown)", row.line);
      continue;
    }
    TraceJob job;
    job.line = row.line;
    job.name = std::string(id);
    Millis started = 0, ended = 0;
    if (problem.empty() && !ParseUtcTimestamp(field(submit), &job.submit)) {
      problem = TimestampProblem("Submit", field(submit));
    }
    if (problem.empty() && !ParseUtcTimestamp(field(start), &started)) {
      problem = TimestampProblem("Start", field(start));
    }
    if (problem.empty() && !ParseUtcTimestamp(field(end), &ended)) {
      problem = TimestampProblem("End", field(end));
    }
    if (problem.empty() && ended < started) problem = "End: before Start: " + Quote(field(end));
    if (problem.empty()) {
      if (elapsed >= 0 && !field(elapsed).empty()) {
        problem = ParseElapsed("Elapsed", field(elapsed), &job.duration);
      } else {
        job.duration = ended - started;
      }
    }
    // GPUs, CPUs, nodes and memory: allocated when the job has an allocation, else requested.
    Tres tres;
    if (problem.empty() && !field(alloc_tres).empty()) {
      problem = ParseTres("AllocTRES", field(alloc_tres), &tres);
    } else if (problem.empty() && !field(req_tres).empty()) {
      problem = ParseTres("ReqTRES", field(req_tres), &tres);
    }
    if (problem.empty() && tres.gpus < 0) {
      if (!field(alloc_gres).empty()) {
        problem = ParseGres("AllocGRES", field(alloc_gres), &tres);
      } else if (!field(req_gres).empty()) {
        problem = ParseGres("ReqGRES", field(req_gres), &tres);
      }
    }
    if (problem.empty() && tres.cpus < 0) {
      if (!field(alloc_cpus).empty()) {
        problem = ParseInt("AllocCPUS", field(alloc_cpus), 0, kMaxCount, &tres.cpus);
      } else if (!field(req_cpus).empty()) {
        problem = ParseInt("ReqCPUS", field(req_cpus), 0, kMaxCount, &tres.cpus);
      }
    }
    if (problem.empty() && tres.nodes < 0) {
      if (!field(alloc_nodes).empty() && field(alloc_nodes) != "0") {
        problem = ParseInt("AllocNodes", field(alloc_nodes), 0, kMaxCount, &tres.nodes);
      } else if (!field(req_nodes).empty()) {
        problem = ParseInt("ReqNodes", field(req_nodes), 0, kMaxCount, &tres.nodes);
      }
    }
    if (problem.empty() && tres.memory < 0 && !field(req_mem).empty()) {
      // ReqMem: an amount with a unit, and in older Slurm `c` (per CPU) or `n` (per node).
      std::string_view amount = field(req_mem);
      std::int64_t per = 1;
      if (amount.back() == 'c' || amount.back() == 'n') {
        per = amount.back() == 'c' ? std::max<std::int64_t>(tres.cpus, 1)
                                   : std::max<std::int64_t>(tres.nodes, 1);
        amount.remove_suffix(1);
      }
      std::int64_t mib = 0;
      if (!ParseMemory(amount, &mib) || mib > limits::kMaxMemoryMiB / per) {
        problem =
            "ReqMem: not an amount of memory ([number][K|M|G|T][c|n]): " + Quote(field(req_mem));
      } else {
        tres.memory = mib * per;
      }
    }
    if (!problem.empty()) {
      trace.bad_rows.push_back({row.line, std::move(problem)});
      continue;
    }
    SplitGpus(std::max<std::int64_t>(tres.gpus, 0), tres.nodes, options, &job);
    if (tres.gpus <= 0 && tres.nodes > 1) job.tasks = static_cast<std::int32_t>(tres.nodes);
    if (tres.cpus > 0) job.cpu_per_task = MilliCpu((tres.cpus * 1000 + job.tasks - 1) / job.tasks);
    if (tres.memory > 0) job.memory_per_task = MemMiB((tres.memory + job.tasks - 1) / job.tasks);
    if (tres.gpus > 0) {
      for (std::string& type : tres.gpu_types) {
        if (std::find(job.gpu_models.begin(), job.gpu_models.end(), type) == job.gpu_models.end()) {
          job.gpu_models.push_back(std::move(type));
        }
      }
    }
    job.user = std::string(field(user));
    job.queue = std::string(field(partition));
    trace.jobs.push_back(std::move(job));
  }
  return trace;
}

}  // namespace arbiter::trace::internal
