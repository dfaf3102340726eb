// Alibaba openb (cluster-trace-gpu-v2023): pod lists and node lists.
#include <algorithm>
#include <cstdint>
#include <string>
#include <unordered_map>

#include "trace/csv.h"
#include "trace/readers.h"

namespace arbiter::trace::internal {
namespace {

// openb nodes have at most 8 GPUs, and a pod is one task on one node.
constexpr std::int64_t kMaxPodGpus = 8;
// Bounds for CPU (milli-cores) and memory (MiB) of one pod or node.
constexpr std::int64_t kMaxResource = limits::kMaxMemoryMiB;  // CPU milli or MiB
static_assert(limits::kMaxMemoryMiB == limits::kMaxCpuMilliPerTask);

}  // namespace

Result<Trace> ReadOpenbPods(std::string_view text, const std::string& file_name) {
  Result<CsvTable> table = ParseCsv(text, file_name);
  if (!table.ok()) return table.status();
  int columns[5] = {};
  constexpr const char* kRequired[5] = {"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"};
  for (int i = 0; i < 5; ++i) {
    Result<int> column = table->Require(kRequired[i]);
    if (!column.ok()) return column.status();
    columns[i] = *column;
  }
  const auto [name, cpu_milli, memory_mib, num_gpu, gpu_milli] = columns;
  const int gpu_spec = table->Column("gpu_spec");
  const int qos = table->Column("qos");
  // The published workload variants have no times: every pod then arrives at 0, in file order,
  // and without deletion_time it never ends (the fill experiments' pods never leave).
  const int creation_time = table->Column("creation_time");
  const int deletion_time = table->Column("deletion_time");
  const int scheduled_time = table->Column("scheduled_time");
  if (deletion_time >= 0 && creation_time < 0) {
    return LineError(file_name, table->header_line,
                     "column \"deletion_time\" without \"creation_time\" (a duration needs both)");
  }

  Trace trace;
  trace.bad_rows = std::move(table->bad_rows);
  for (const CsvRow& row : table->rows) {
    const auto field = [&row](int column) -> const std::string& { return row.fields[column]; };
    TraceJob job;
    job.line = row.line;
    job.name = field(name);
    if (job.name.empty()) job.name = "openb-" + std::to_string(row.line);
    std::int64_t cpu = 0, memory = 0, gpus = 0, milli = 0;
    Millis created = 0, deleted = 0, scheduled = 0;
    std::string problem = ParseInt("cpu_milli", field(cpu_milli), 0, kMaxResource, &cpu);
    if (problem.empty()) {
      problem = ParseInt("memory_mib", field(memory_mib), 0, kMaxResource, &memory);
    }
    if (problem.empty()) problem = ParseInt("num_gpu", field(num_gpu), 0, kMaxPodGpus, &gpus);
    if (problem.empty()) {
      problem = ParseInt("gpu_milli", field(gpu_milli), 0, kMilliPerGpu, &milli);
    }
    if (problem.empty()) {
      if (gpus == 0 && milli != 0) {
        problem = "gpu_milli: must be 0 for a pod without GPUs: " + Quote(field(gpu_milli));
      } else if (gpus == 1 && milli == 0) {
        problem = "gpu_milli: must be at least 1 for a pod with a GPU: " + Quote(field(gpu_milli));
      } else if (gpus > 1 && milli != kMilliPerGpu) {
        problem = "gpu_milli: must be 1000 for a pod of " + std::to_string(gpus) +
                  " GPUs: " + Quote(field(gpu_milli));
      }
    }
    if (problem.empty() && creation_time >= 0) {
      problem = ParseSeconds("creation_time", field(creation_time), &created);
    }
    if (problem.empty() && deletion_time >= 0) {
      problem = ParseSeconds("deletion_time", field(deletion_time), &deleted);
    }
    if (problem.empty() && scheduled_time >= 0 && !field(scheduled_time).empty()) {
      problem = ParseSeconds("scheduled_time", field(scheduled_time), &scheduled);
    }
    const Millis started = std::max(created, scheduled);
    if (problem.empty() && deletion_time >= 0 && deleted < started) {
      problem = "deletion_time: before the pod started (" +
                std::string(scheduled > created ? "scheduled_time" : "creation_time") +
                "): " + Quote(field(deletion_time));
    }
    if (!problem.empty()) {
      trace.bad_rows.push_back({row.line, std::move(problem)});
      continue;
    }
    job.submit = created;
    job.duration = deletion_time >= 0 ? deleted - started : limits::kMaxDuration;
    job.tasks = 1;  // a pod is one task: never split
    job.gpu_per_task = MilliGpu(gpus == 1 ? milli : gpus * kMilliPerGpu);
    job.cpu_per_task = MilliCpu(cpu);
    job.memory_per_task = MemMiB(memory);
    if (gpu_spec >= 0) job.gpu_models = SplitList(field(gpu_spec));
    if (qos >= 0) job.priority_class = field(qos);
    trace.jobs.push_back(std::move(job));
  }
  return trace;
}

}  // namespace arbiter::trace::internal

namespace arbiter::trace {

Result<std::vector<TraceNode>> ReadOpenbNodes(std::string_view text, const std::string& file_name) {
  using internal::LineError;
  Result<internal::CsvTable> table = internal::ParseCsv(text, file_name);
  if (!table.ok()) return table.status();
  if (!table->bad_rows.empty()) {
    const BadRow& bad = table->bad_rows.front();
    return LineError(file_name, bad.line, bad.problem);
  }
  int columns[5] = {};
  constexpr const char* kRequired[5] = {"sn", "cpu_milli", "memory_mib", "gpu", "model"};
  for (int i = 0; i < 5; ++i) {
    Result<int> column = table->Require(kRequired[i]);
    if (!column.ok()) return column.status();
    columns[i] = *column;
  }
  const auto [sn, cpu_milli, memory_mib, gpu, model] = columns;

  std::vector<TraceNode> nodes;
  nodes.reserve(table->rows.size());
  std::unordered_map<std::string, std::int64_t> first_line;  // node name -> its line
  for (const internal::CsvRow& row : table->rows) {
    TraceNode node;
    node.name = row.fields[sn];
    if (node.name.empty()) return LineError(file_name, row.line, "sn: empty");
    const auto [it, inserted] = first_line.emplace(node.name, row.line);
    if (!inserted) {
      return LineError(file_name, row.line,
                       "sn: node " + internal::Quote(node.name) + " appears twice (first on line " +
                           std::to_string(it->second) + ")");
    }
    std::int64_t cpu = 0, memory = 0, gpus = 0;
    std::string problem =
        internal::ParseInt("cpu_milli", row.fields[cpu_milli], 0, internal::kMaxResource, &cpu);
    if (problem.empty()) {
      problem = internal::ParseInt("memory_mib", row.fields[memory_mib], 0, internal::kMaxResource,
                                   &memory);
    }
    if (problem.empty()) {
      problem = internal::ParseInt("gpu", row.fields[gpu], 0, internal::kMaxCount, &gpus);
    }
    if (!problem.empty()) return LineError(file_name, row.line, problem);
    node.cpu = MilliCpu(cpu);
    node.memory = MemMiB(memory);
    node.gpus = static_cast<std::int32_t>(gpus);
    node.gpu_model = row.fields[model];
    nodes.push_back(std::move(node));
  }
  return nodes;
}

}  // namespace arbiter::trace
