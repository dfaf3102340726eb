// Format names, detection, GPU splitting, the bad rows' descriptions and the entry points; the
// formats themselves are in philly.cc, tiresias.cc, openb.cc, pai.cc, helios.cc, swf.cc,
// sacct.cc, arbiter_csv.cc and arbiter_json.cc.
#include "trace/trace.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>

#include "trace/csv.h"
#include "trace/readers.h"

namespace arbiter::trace {
namespace {

constexpr std::array<Format, 9> kFormats = {Format::kPhilly, Format::kTiresias, Format::kOpenb,
                                            Format::kCsv,    Format::kJson,     Format::kPai,
                                            Format::kHelios, Format::kSwf,      Format::kSacct};
constexpr const char* kFormatList = "philly, tiresias, openb, csv, json, pai, helios, swf, sacct";

// The header fields a format's first line starts with.
struct Signature {
  Format format;
  std::array<std::string_view, 4> fields;  // unused trailing entries are empty
};
constexpr std::array<Signature, 3> kSignatures = {{
    {Format::kPhilly, {"timestamp", "duration", "num_gpus", ""}},
    {Format::kTiresias, {"job_id", "num_gpu", "submit_time", ""}},
    {Format::kOpenb, {"name", "cpu_milli", "memory_mib", "num_gpu"}},
}};

// Header fields a format's header holds, in any order.
struct ColumnSignature {
  Format format;
  std::array<std::string_view, 3> columns;
};
constexpr std::array<ColumnSignature, 3> kColumnSignatures = {{
    {Format::kHelios, {"gpu_num", "vc", "submit_time"}},
    {Format::kPai, {"job_name", "task_name", "plan_gpu"}},
    {Format::kPai, {"job_name", "inst_id", "start_time"}},  // the job table: ReadPai explains
}};

bool Matches(const Signature& signature, const std::vector<std::string>& fields) {
  for (std::size_t i = 0; i < signature.fields.size(); ++i) {
    if (signature.fields[i].empty()) break;
    if (i >= fields.size() || fields[i] != signature.fields[i]) return false;
  }
  return true;
}

bool Has(const std::vector<std::string>& fields, std::string_view name) {
  return std::find(fields.begin(), fields.end(), name) != fields.end();
}

// An SWF job line: 18 whitespace-separated numbers.
bool IsSwfLine(std::string_view line) {
  int fields = 0;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    if (i >= line.size()) break;
    const std::size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
    const std::string_view field = line.substr(start, i - start);
    if (field.find_first_not_of("0123456789.-") != std::string_view::npos) return false;
    ++fields;
  }
  return fields == 18;
}

Result<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int error = errno;
    std::string message = path + ": cannot open";
    if (error != 0) message += ": " + std::generic_category().message(error);
    if (error == ENOENT || error == ENOTDIR) return Status::NotFound(std::move(message));
    if (error == EACCES || error == EPERM) return Status::PermissionDenied(std::move(message));
    return Status::Unavailable(std::move(message));
  }
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return Status::Unavailable(path + ": cannot read");
  return text;
}

}  // namespace

const char* FormatName(Format format) {
  switch (format) {
    case Format::kPhilly:
      return "philly";
    case Format::kTiresias:
      return "tiresias";
    case Format::kOpenb:
      return "openb";
    case Format::kCsv:
      return "csv";
    case Format::kJson:
      return "json";
    case Format::kPai:
      return "pai";
    case Format::kHelios:
      return "helios";
    case Format::kSwf:
      return "swf";
    case Format::kSacct:
      return "sacct";
  }
  return "unknown";
}

const char* TaskSplitName(TaskSplit split) {
  switch (split) {
    case TaskSplit::kNode:
      return "node";
    case TaskSplit::kGpu:
      return "gpu";
  }
  return "unknown";
}

Result<TaskSplit> ParseTaskSplit(std::string_view name) {
  if (name == "node") return TaskSplit::kNode;
  if (name == "gpu") return TaskSplit::kGpu;
  return Status::InvalidArgument("unknown task split " + internal::Quote(name) +
                                 " (node: one task per node the job fills; gpu: one task per GPU)");
}

std::vector<std::string> DescribeBadRows(const Trace& trace, const std::string& file_name) {
  std::vector<std::string> lines;
  for (const BadRow& row : trace.bad_rows) {
    lines.push_back(file_name + ":" + std::to_string(row.line) + ": " + row.problem);
  }
  for (const RowCount& more : trace.more_bad_rows) {
    lines.push_back(file_name + ": " + std::to_string(more.rows) + " more row" +
                    (more.rows == 1 ? "" : "s") + " with " + internal::Quote(more.kind) +
                    " (lines " + std::to_string(more.first_line) + " to " +
                    std::to_string(more.last_line) + ")");
  }
  return lines;
}

std::vector<std::string> DescribeSkipped(const Trace& trace, const std::string& file_name) {
  std::vector<std::string> lines;
  for (const RowCount& skipped : trace.skipped) {
    lines.push_back(file_name + ": " + std::to_string(skipped.rows) + " row" +
                    (skipped.rows == 1 ? "" : "s") + " skipped: " + skipped.kind + " (lines " +
                    std::to_string(skipped.first_line) + " to " +
                    std::to_string(skipped.last_line) + ")");
  }
  return lines;
}

Result<Format> ParseFormat(std::string_view name) {
  for (Format format : kFormats) {
    if (name == FormatName(format)) return format;
  }
  return Status::InvalidArgument("unknown trace format " + internal::Quote(name) +
                                 " (formats: " + kFormatList + ")");
}

Result<Format> DetectFormat(std::string_view text) {
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
  const std::size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) {
    return Status::InvalidArgument("cannot detect the trace format: the text is empty");
  }
  if (text[first] == '{' || text[first] == '[') return Format::kJson;
  if (text[first] == ';') return Format::kSwf;
  text.remove_prefix(first);
  const std::string_view header = internal::Trim(text.substr(0, text.find('\n')));
  if (IsSwfLine(header)) return Format::kSwf;
  std::vector<std::string> fields;
  if (std::count(header.begin(), header.end(), '|') >= 2) return Format::kSacct;
  if (internal::SplitCsvLine(header, &fields)) {
    for (const Signature& signature : kSignatures) {
      if (Matches(signature, fields)) return signature.format;
    }
    for (const ColumnSignature& signature : kColumnSignatures) {
      if (std::all_of(signature.columns.begin(), signature.columns.end(),
                      [&](std::string_view column) { return Has(fields, column); })) {
        return signature.format;
      }
    }
    if (Has(fields, "submit")) return Format::kCsv;
  }
  return Status::InvalidArgument(
      "cannot detect the trace format from the first line " + internal::Quote(header) +
      ": expected philly (timestamp,duration,num_gpus,...), tiresias "
      "(job_id,num_gpu,submit_time,...), openb (name,cpu_milli,memory_mib,num_gpu,...), pai "
      "(job_name,task_name,...,plan_gpu,...), helios (job_id,user,vc,gpu_num,...), swf (';' "
      "comments, 18 numbers a line), sacct (JobID|...|Submit|...), csv (a header with a submit "
      "column) or json (starting with '{' or '['); name the format to read a file without a "
      "header");
}

std::int32_t GpusPerTask(std::int64_t gpus, std::int64_t gpus_per_node) {
  if (gpus <= 0) return 0;
  if (gpus_per_node < 1) gpus_per_node = 1;
  if (gpus <= gpus_per_node) return static_cast<std::int32_t>(gpus);
  for (std::int64_t per_task = gpus_per_node; per_task > 1; --per_task) {
    if (gpus % per_task == 0) return static_cast<std::int32_t>(per_task);
  }
  return 1;
}

namespace {

Status CheckOptions(const ReadOptions& options, const std::string& file_name) {
  if (options.gpus_per_node < 1) {
    return Status::InvalidArgument(file_name + ": GPUs per node must be at least 1, not " +
                                   std::to_string(options.gpus_per_node));
  }
  if (options.gpus_per_node > internal::kMaxCount) {
    return Status::InvalidArgument(file_name + ": GPUs per node must be at most " +
                                   std::to_string(internal::kMaxCount) + ", not " +
                                   std::to_string(options.gpus_per_node));
  }
  if (options.processors_per_gpu < 1 || options.processors_per_gpu > internal::kMaxCount) {
    return Status::InvalidArgument(file_name + ": processors per GPU must be 1 to " +
                                   std::to_string(internal::kMaxCount) + ", not " +
                                   std::to_string(options.processors_per_gpu));
  }
  if (options.max_bad_rows_per_kind < 0) {
    return Status::InvalidArgument(file_name + ": bad rows listed per kind must not be negative");
  }
  return Status::Ok();
}

}  // namespace

Result<Trace> ReadTrace(std::string_view text, Format format, const std::string& file_name,
                        const ReadOptions& options) {
  if (Status s = CheckOptions(options, file_name); !s.ok()) return s;
  Result<Trace> trace = Status::Internal("unknown trace format");
  switch (format) {
    case Format::kPhilly:
      trace = internal::ReadPhilly(text, file_name, options);
      break;
    case Format::kTiresias:
      trace = internal::ReadTiresias(text, file_name, options);
      break;
    case Format::kOpenb:
      trace = internal::ReadOpenbPods(text, file_name);
      break;
    case Format::kCsv:
      trace = internal::ReadArbiterCsv(text, file_name);
      break;
    case Format::kJson:
      trace = internal::ReadArbiterJson(text, file_name);
      break;
    case Format::kPai:
      trace = internal::ReadPai(text, file_name, "", "", options);
      break;
    case Format::kHelios:
      trace = internal::ReadHelios(text, file_name, options);
      break;
    case Format::kSwf:
      trace = internal::ReadSwf(text, file_name, options);
      break;
    case Format::kSacct:
      trace = internal::ReadSacct(text, file_name, options);
      break;
  }
  if (trace.ok()) internal::Finish(&*trace, options);
  return trace;
}

Result<Trace> ReadTrace(std::string_view text, Format format, const std::string& file_name,
                        std::int64_t gpus_per_node) {
  ReadOptions options;
  options.gpus_per_node = gpus_per_node;
  return ReadTrace(text, format, file_name, options);
}

Result<Trace> ReadPaiTables(std::string_view task_text, const std::string& task_file_name,
                            std::string_view job_text, const std::string& job_file_name,
                            const ReadOptions& options) {
  if (Status s = CheckOptions(options, task_file_name); !s.ok()) return s;
  Result<Trace> trace =
      internal::ReadPai(task_text, task_file_name, job_text, job_file_name, options);
  if (trace.ok()) internal::Finish(&*trace, options);
  return trace;
}

namespace {

constexpr const char* kPaiTaskFile = "pai_task_table.csv";
constexpr const char* kPaiJobFile = "pai_job_table.csv";

// pai: a folder with the task table (and the job table), or the task table with the job table
// beside it.
Result<Trace> ReadPaiPath(const std::filesystem::path& path, const ReadOptions& options) {
  std::error_code error;
  const bool folder = std::filesystem::is_directory(path, error);
  const std::filesystem::path task = folder ? path / kPaiTaskFile : path;
  const std::filesystem::path job = (folder ? path : path.parent_path()) / kPaiJobFile;
  Result<std::string> task_text = ReadWholeFile(task.string());
  if (!task_text.ok()) {
    if (folder) {
      return Status::NotFound(path.string() + ": a pai trace folder holds " + kPaiTaskFile +
                              " (and " + kPaiJobFile + "): " + task_text.status().message());
    }
    return task_text.status();
  }
  std::string job_text;
  std::string job_name;
  if (job != task && std::filesystem::is_regular_file(job, error)) {
    Result<std::string> read = ReadWholeFile(job.string());
    if (!read.ok()) return read.status();
    job_text = std::move(*read);
    job_name = job.string();
    if (job_text.empty()) job_text = "\n";  // an empty job table is still a job table
  }
  return ReadPaiTables(*task_text, task.string(), job_text, job_name, options);
}

bool IsPaiTaskFileName(const std::filesystem::path& path) {
  const std::string name = path.filename().string();
  return name.rfind("pai_task_table", 0) == 0;
}

}  // namespace

Result<Trace> ReadTraceFile(const std::string& path, std::string_view format,
                            const ReadOptions& options) {
  std::error_code error;
  const bool folder = std::filesystem::is_directory(path, error);
  if (format == "pai" || (format.empty() && (folder || IsPaiTaskFileName(path)))) {
    return ReadPaiPath(path, options);
  }
  if (folder) {
    return Status::InvalidArgument(path + ": a folder: only a pai trace is read from a folder (" +
                                   kPaiTaskFile + ", " + kPaiJobFile + ")");
  }
  Result<std::string> text = ReadWholeFile(path);
  if (!text.ok()) return text.status();
  Result<Format> parsed = format.empty() ? DetectFormat(*text) : ParseFormat(format);
  if (!parsed.ok()) return Status(parsed.status()).WithContext(path + ": ");
  return ReadTrace(*text, *parsed, path, options);
}

Result<Trace> ReadTraceFile(const std::string& path, std::string_view format,
                            std::int64_t gpus_per_node) {
  ReadOptions options;
  options.gpus_per_node = gpus_per_node;
  return ReadTraceFile(path, format, options);
}

Result<std::vector<TraceNode>> ReadOpenbNodesFile(const std::string& path) {
  Result<std::string> text = ReadWholeFile(path);
  if (!text.ok()) return text.status();
  return ReadOpenbNodes(*text, path);
}

}  // namespace arbiter::trace
