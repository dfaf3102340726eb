// CSV files of each run: the time series and one row per job.
#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <system_error>
#include <vector>

#include "report/common.h"
#include "report/report.h"

namespace arbiter::report {
namespace {

// A field quoted when it holds a comma, a quote or a line break; quotes doubled.
std::string Field(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
  return out;
}

std::string Cell(double value) {
  return internal::Finite(value) ? fmt::format("{}", value) : std::string();
}

std::string Seconds(Millis millis) {
  if (millis % kMillisPerSecond == 0) return fmt::format("{}", millis / kMillisPerSecond);
  return Cell(static_cast<double>(millis) / static_cast<double>(kMillisPerSecond));
}

void AppendRow(std::string& out, const std::vector<std::string>& fields) {
  for (std::size_t i = 0; i < fields.size(); ++i) {
    if (i > 0) out += ',';
    out += fields[i];
  }
  out += '\n';
}

// Letters, digits, '.', '_' and '-' kept, anything else '_'; never empty, never "." or "..".
std::string SafeName(const std::string& name) {
  std::string out;
  for (const char c : name) {
    const bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '.' || c == '_' || c == '-';
    out += keep ? c : '_';
  }
  if (out.empty() || out == "." || out == "..") out = "run" + out;
  return out;
}

std::string SeriesCsv(const sim::RunResult& run) {
  std::vector<std::string> header = {"t_s",          "allocated_gpus", "busy_gpus",
                                     "healthy_gpus", "pending_jobs",   "running_jobs"};
  for (const std::string& queue : run.queue_names) {
    header.push_back(Field("alloc_" + queue));
    header.push_back(Field("pending_" + queue));
  }
  for (const sim::ServiceMetrics& service : run.services) {
    header.push_back(Field("p99_ms_" + service.name));
    header.push_back(Field("replicas_" + service.name));
  }
  for (const std::string& type : run.gpu_types) header.push_back(Field("type_alloc_" + type));
  std::string out;
  AppendRow(out, header);
  for (const sim::Sample& s : run.series) {
    std::vector<std::string> row = {Seconds(s.t),
                                    Cell(s.allocated_gpus),
                                    Cell(s.busy_gpus),
                                    Cell(s.healthy_gpus),
                                    fmt::format("{}", s.pending_jobs),
                                    fmt::format("{}", s.running_jobs)};
    for (std::size_t q = 0; q < run.queue_names.size(); ++q) {
      row.push_back(q < s.queue_allocated_gpus.size() ? Cell(s.queue_allocated_gpus[q]) : "");
      row.push_back(q < s.queue_pending.size() ? fmt::format("{}", s.queue_pending[q]) : "");
    }
    for (std::size_t i = 0; i < run.services.size(); ++i) {
      row.push_back(i < s.service_latency_p99_ms.size() ? Cell(s.service_latency_p99_ms[i]) : "");
      row.push_back(i < s.service_replicas.size() ? Cell(s.service_replicas[i]) : "");
    }
    for (std::size_t t = 0; t < run.gpu_types.size(); ++t) {
      row.push_back(t < s.type_allocated_gpus.size() ? Cell(s.type_allocated_gpus[t]) : "");
    }
    AppendRow(out, row);
  }
  return out;
}

std::string JobsCsv(const sim::RunResult& run) {
  std::string out;
  AppendRow(out, {"id", "name", "queue", "priority_class", "workload", "kind", "gpus", "submit_s",
                  "first_start_s", "end_s", "wait_s", "jct_s", "evictions", "failures",
                  "gpu_hours_lost"});
  for (const sim::JobRecord& job : run.jobs) {
    const bool started = job.first_start >= 0;
    const bool ended = job.end >= 0;
    AppendRow(out,
              {fmt::format("{}", job.id), Field(job.name), Field(job.queue),
               Field(job.priority_class), Field(job.workload), sim::WorkKindName(job.kind),
               Cell(job.gpus), Seconds(job.submit), started ? Seconds(job.first_start) : "",
               ended ? Seconds(job.end) : "", started ? Seconds(job.first_start - job.submit) : "",
               ended ? Seconds(job.end - job.submit) : "", fmt::format("{}", job.evictions),
               fmt::format("{}", job.failures), Cell(job.gpu_hours_lost)});
  }
  return out;
}

Status WriteFile(const std::filesystem::path& path, const std::string& text) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  if (!file) {
    const int error = errno;
    std::string message = fmt::format("cannot write {}: {}", path.string(), std::strerror(error));
    if (error == EACCES || error == EPERM) return Status::PermissionDenied(std::move(message));
    if (error == ENOENT || error == ENOTDIR) return Status::NotFound(std::move(message));
    return Status::Unavailable(std::move(message));
  }
  file << text;
  file.close();
  if (!file) return Status::Unavailable(fmt::format("cannot write {}", path.string()));
  return Status::Ok();
}

}  // namespace

Status WriteCsv(std::span<const sim::RunResult> runs, const std::string& dir) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) {
    return Status::Unavailable(fmt::format("cannot create directory {}: {}", dir, error.message()));
  }
  std::set<std::string> used;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    // Two runs whose names map to the same file name get the run's position appended.
    std::string base = SafeName(runs[i].name);
    if (used.count(base) > 0) base += fmt::format("-{}", i + 1);
    used.insert(base);
    const std::filesystem::path root(dir);
    if (Status s = WriteFile(root / (base + "-series.csv"), SeriesCsv(runs[i])); !s.ok()) return s;
    if (Status s = WriteFile(root / (base + "-jobs.csv"), JobsCsv(runs[i])); !s.ok()) return s;
  }
  return Status::Ok();
}

}  // namespace arbiter::report
