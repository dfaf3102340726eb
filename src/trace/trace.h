// Trace readers: public GPU-cluster job traces into one neutral record, before the simulator maps
// them onto a cluster (queues, priority classes, task shapes). Formats (docs/traces.md):
//
//   philly    Microsoft Philly as prepared by Pollux: timestamp,duration,num_gpus,gpu_time,cluster
//             (the virtual cluster becomes the queue).
//   tiresias  Tiresias: job_id,num_gpu,submit_time,iterations,model_name,duration,interval.
//   openb     Alibaba openb pods: name,cpu_milli,memory_mib,num_gpu,gpu_milli[,gpu_spec,qos,...]
//             (`gpu_spec` lists acceptable models separated by '|'; qos becomes the class; without
//             creation_time every pod arrives at 0, without deletion_time it never ends).
//   pai       Alibaba PAI 2020: the task table (one job per task: inst_num instances of plan_gpu
//             percent of a GPU on gpu_type), with the job table for users and submission times.
//   helios    SenseTime Helios job logs (cluster_log.csv): job_id,user,vc,gpu_num,cpu_num,...
//   swf       The Parallel Workloads Archive's Standard Workload Format (18 fields a line).
//   sacct     Slurm `sacct --parsable2` output with its header (JobID|Submit|Start|End|...).
//   csv       Arbiter's own job CSV (docs/traces.md): a header naming any of the columns below.
//   json      Arbiter's own job JSON: {"jobs": [{...the same fields...}]}.
//
// Columns are found by their header name, so their order does not matter. Rows may come in any
// order; the readers sort jobs by submit time (stably) and make times relative to the earliest
// submission. A bad row is never dropped silently: it is reported with its line and column, and
// the caller decides whether to fail or to skip it; the first few of each kind are listed, the
// rest counted. Rows a format leaves out on purpose (a job that never ran, a Slurm job step) are
// counted by reason in `skipped`.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "arbiter/quantity.h"
#include "arbiter/status.h"

namespace arbiter::trace {

enum class Format : std::uint8_t {
  kPhilly,
  kTiresias,
  kOpenb,
  kCsv,
  kJson,
  kPai,
  kHelios,
  kSwf,
  kSacct
};

// "philly", "tiresias", "openb", "csv", "json", "pai", "helios", "swf", "sacct".
const char* FormatName(Format format);
Result<Format> ParseFormat(std::string_view name);
// The format a file's first line (its header) or first character announces: '{' or '[' json,
// ';' swf (a header comment), a line of 18 numbers swf, '|'-separated fields sacct.
Result<Format> DetectFormat(std::string_view text);

// How a job that gives only its GPU count (philly, tiresias, helios, swf, sacct) becomes tasks.
enum class TaskSplit : std::uint8_t {
  kNode,  // "node": one task when the job fits a node, else tasks of GpusPerTask (or the node
          // count the trace gives, helios and sacct)
  kGpu,   // "gpu": one task per GPU, as Tiresias's `count` placement scheme needs
};
const char* TaskSplitName(TaskSplit split);
Result<TaskSplit> ParseTaskSplit(std::string_view name);

// The options of a read. The defaults read every format as documented in docs/traces.md.
struct ReadOptions {
  // Splitting whole-GPU jobs: the GPUs of the largest node (at least 1), and the scheme.
  std::int64_t gpus_per_node = 8;
  TaskSplit split = TaskSplit::kNode;
  // swf: a job of P processors asks for ceil(P / processors_per_gpu) GPUs (at least 1).
  std::int64_t processors_per_gpu = 1;
  // Bad rows listed per kind of problem; the rest are counted in Trace::more_bad_rows. 0: all.
  std::int64_t max_bad_rows_per_kind = 5;
  // sacct written with --noheader: the fields as given to --format, in order. A first line that
  // starts with the first of them is still read as the header.
  std::vector<std::string> sacct_columns;
};

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

// Rows of one kind: a kind of problem (the problem without the row's own values, e.g.
// `creation_time: empty`) or a reason a row was skipped, with how many rows and their first and
// last lines.
struct RowCount {
  std::string kind;
  std::int64_t rows = 0;
  std::int64_t first_line = 0;
  std::int64_t last_line = 0;
};

struct Trace {
  std::vector<TraceJob> jobs;  // sorted by submit time, ties in file order
  // The first ReadOptions::max_bad_rows_per_kind bad rows of each kind, by line.
  std::vector<BadRow> bad_rows;
  // Every bad row, listed or not.
  std::int64_t bad_row_count = 0;
  // Per kind, the bad rows not listed in bad_rows (only kinds that have some), by first line.
  std::vector<RowCount> more_bad_rows;
  // Rows left out on purpose, per reason (a job that never ran, a Slurm job step), by first line.
  std::vector<RowCount> skipped;
};

// The bad rows as lines for people: `FILE:LINE: problem` for each listed row, then per kind with
// more rows `FILE: N more rows with "kind" (lines A to B)`.
std::vector<std::string> DescribeBadRows(const Trace& trace, const std::string& file_name);
// The skipped rows as lines: `FILE: N rows skipped: reason (lines A to B)`.
std::vector<std::string> DescribeSkipped(const Trace& trace, const std::string& file_name);

// How many GPUs per task a trace's whole-GPU job of `gpus` GPUs gets when a node has at most
// `gpus_per_node`: one task when it fits a node, otherwise the largest divisor of `gpus` not above
// `gpus_per_node` (e.g. 16 on 8-GPU nodes: 2 tasks of 8; 12: 2 tasks of 6).
std::int32_t GpusPerTask(std::int64_t gpus, std::int64_t gpus_per_node);

// Reads a trace. Fails (naming `file_name`, the line and the column) only when the text as a whole
// cannot be read: no header, a required column missing, malformed JSON, bad options. Bad rows go
// to bad_rows. Multi-GPU jobs of formats that give only a GPU count are split as
// `options.split` says. For pai, `text` is the task table alone (no users; submission at the
// task's launch); ReadPaiTables joins the job table.
Result<Trace> ReadTrace(std::string_view text, Format format, const std::string& file_name,
                        const ReadOptions& options);
Result<Trace> ReadTrace(std::string_view text, Format format, const std::string& file_name,
                        std::int64_t gpus_per_node = 8);
// Alibaba PAI 2020: the task table, and the job table when `job_text` is not empty (its file name
// for errors in `job_file_name`). With or without header lines (upstream ships none).
Result<Trace> ReadPaiTables(std::string_view task_text, const std::string& task_file_name,
                            std::string_view job_text, const std::string& job_file_name,
                            const ReadOptions& options = {});
// Reads a file; the format is detected from its content when `format` is empty (a file named
// pai_task_table*.csv is pai). pai: `path` is a folder holding pai_task_table.csv (and
// pai_job_table.csv), or the task table itself, read with pai_job_table.csv when it is beside it.
Result<Trace> ReadTraceFile(const std::string& path, std::string_view format,
                            const ReadOptions& options);
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
