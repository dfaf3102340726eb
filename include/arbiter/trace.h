// Trace readers: public GPU-cluster job traces into one neutral record, before the simulator maps
// them onto a cluster (queues, priority classes, task shapes). Formats:
//
//   philly    Microsoft Philly as prepared by Pollux: timestamp,duration,num_gpus,gpu_time,cluster
//             (the virtual cluster becomes the queue).
//   tiresias  Tiresias: job_id,num_gpu,submit_time,iterations,model_name,duration,interval.
//   openb     Alibaba openb pods: name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,...
//             (`gpu_spec` lists acceptable models separated by '|'; qos becomes the class).
//   csv       Arbiter's own job CSV (docs/traces.md): a header naming any of the columns below.
//   json      Arbiter's own job JSON: {"jobs": [{...the same fields...}]}.
//
// Columns are found by their header name, so their order does not matter. Rows may come in any
// order; the readers sort jobs by submit time (stably) and make times relative to the earliest
// submission. A bad row is never dropped silently: it is reported with its line and column, and
// the caller decides whether to fail or to skip it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "arbiter/quantity.h"
#include "arbiter/status.h"

namespace arbiter::trace {

enum class Format : std::uint8_t { kPhilly, kTiresias, kOpenb, kCsv, kJson };

// "philly", "tiresias", "openb", "csv", "json".
const char* FormatName(Format format);
Result<Format> ParseFormat(std::string_view name);
// The format a file's first line (its header) or first character ('{' or '[': json) announces.
Result<Format> DetectFormat(std::string_view text);

// One job of a trace. A job is a gang of `tasks` identical tasks.
struct TraceJob {
  std::string name;   // the trace's id, or "<format>-<row>" when it has none
  std::string queue;  // Philly's virtual cluster, or the csv/json `queue`; may be empty
  std::string user;
  std::string priority_class;  // openb's qos, or the csv/json `priority_class`; may be empty
  std::string kind;            // csv/json `kind` (training, batch, inference); may be empty
  Millis submit = 0;           // from the earliest submission in the trace
  Millis duration = 0;         // run time when it runs uninterrupted
  std::int32_t tasks = 1;
  MilliGpu gpu_per_task{0};  // 0, a fraction of one GPU (1..999), or whole GPUs (k x 1000)
  MilliCpu cpu_per_task{0};
  MemMiB memory_per_task{0};
  std::vector<std::string> gpu_models;  // acceptable GPU models; empty: any
  Millis checkpoint_interval = 0;       // csv/json only; 0: none
  std::int64_t line = 0;                // 1-based line of the row (json: the job's index + 1)
};

// A row the reader could not take: `line` is 1-based; `problem` names the column, e.g.
// `num_gpus: not a number: "x"`.
struct BadRow {
  std::int64_t line = 0;
  std::string problem;
};

struct Trace {
  std::vector<TraceJob> jobs;  // sorted by submit time, ties in file order
  std::vector<BadRow> bad_rows;
};

// How many GPUs per task a trace's whole-GPU job of `gpus` GPUs gets when a node has at most
// `gpus_per_node`: one task when it fits a node, otherwise the largest divisor of `gpus` not above
// `gpus_per_node` (e.g. 16 on 8-GPU nodes: 2 tasks of 8; 12: 2 tasks of 6).
std::int32_t GpusPerTask(std::int64_t gpus, std::int64_t gpus_per_node);

// Reads a trace. Fails (naming `file_name`, the line and the column) only when the text as a whole
// cannot be read: no header, a required column missing, malformed JSON. Bad rows go to bad_rows.
// Multi-GPU jobs of formats that give only a GPU count are split by GpusPerTask with
// `gpus_per_node` (default 8).
Result<Trace> ReadTrace(std::string_view text, Format format, const std::string& file_name,
                        std::int64_t gpus_per_node = 8);
// Reads a file; the format is detected from its content when `format` is empty.
Result<Trace> ReadTraceFile(const std::string& path, std::string_view format = "",
                            std::int64_t gpus_per_node = 8);

// A node of a trace's cluster description.
struct TraceNode {
  std::string name;
  MilliCpu cpu{0};
  MemMiB memory{0};
  std::int32_t gpus = 0;
  std::string gpu_model;  // empty for a CPU-only node
};

// openb node lists: sn,cpu_milli,memory_mib,gpu,model. Any bad row fails the whole read (a
// cluster with a node missing would silently change every result).
Result<std::vector<TraceNode>> ReadOpenbNodes(std::string_view text, const std::string& file_name);
Result<std::vector<TraceNode>> ReadOpenbNodesFile(const std::string& path);

}  // namespace arbiter::trace
