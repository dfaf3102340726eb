// Format names, detection, GPU splitting and the entry points; the formats themselves are in
// philly.cc, tiresias.cc, openb.cc, arbiter_csv.cc and arbiter_json.cc.
#include "arbiter/trace.h"

#include <array>
#include <cerrno>
#include <fstream>
#include <iterator>
#include <system_error>

#include "trace/csv.h"
#include "trace/readers.h"

namespace arbiter::trace {
namespace {

constexpr std::array<Format, 5> kFormats = {Format::kPhilly, Format::kTiresias, Format::kOpenb,
                                            Format::kCsv, Format::kJson};

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

bool Matches(const Signature& signature, const std::vector<std::string>& fields) {
  for (std::size_t i = 0; i < signature.fields.size(); ++i) {
    if (signature.fields[i].empty()) break;
    if (i >= fields.size() || fields[i] != signature.fields[i]) return false;
  }
  return true;
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
  }
  return "unknown";
}

Result<Format> ParseFormat(std::string_view name) {
  for (Format format : kFormats) {
    if (name == FormatName(format)) return format;
  }
  return Status::InvalidArgument("unknown trace format " + internal::Quote(name) +
                                 " (formats: philly, tiresias, openb, csv, json)");
}

Result<Format> DetectFormat(std::string_view text) {
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
  const std::size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) {
    return Status::InvalidArgument("cannot detect the trace format: the text is empty");
  }
  if (text[first] == '{' || text[first] == '[') return Format::kJson;
  text.remove_prefix(first);
  const std::string_view header = internal::Trim(text.substr(0, text.find('\n')));
  std::vector<std::string> fields;
  if (internal::SplitCsvLine(header, &fields)) {
    for (const Signature& signature : kSignatures) {
      if (Matches(signature, fields)) return signature.format;
    }
    for (const std::string& field : fields) {
      if (field == "submit") return Format::kCsv;
    }
  }
  return Status::InvalidArgument(
      "cannot detect the trace format from the first line " + internal::Quote(header) +
      ": expected philly (timestamp,duration,num_gpus,...), tiresias "
      "(job_id,num_gpu,submit_time,...), openb (name,cpu_milli,memory_mib,num_gpu,...), csv (a "
      "header with a submit column) or json (starting with '{' or '[')");
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

Result<Trace> ReadTrace(std::string_view text, Format format, const std::string& file_name,
                        std::int64_t gpus_per_node) {
  if (gpus_per_node < 1) {
    return Status::InvalidArgument(file_name + ": GPUs per node must be at least 1, not " +
                                   std::to_string(gpus_per_node));
  }
  Result<Trace> trace = Status::Internal("unknown trace format");
  switch (format) {
    case Format::kPhilly:
      trace = internal::ReadPhilly(text, file_name, gpus_per_node);
      break;
    case Format::kTiresias:
      trace = internal::ReadTiresias(text, file_name, gpus_per_node);
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
  }
  if (trace.ok()) internal::Finish(&*trace);
  return trace;
}

Result<Trace> ReadTraceFile(const std::string& path, std::string_view format,
                            std::int64_t gpus_per_node) {
  Result<std::string> text = ReadWholeFile(path);
  if (!text.ok()) return text.status();
  Result<Format> parsed = format.empty() ? DetectFormat(*text) : ParseFormat(format);
  if (!parsed.ok()) return Status(parsed.status()).WithContext(path + ": ");
  return ReadTrace(*text, *parsed, path, gpus_per_node);
}

Result<std::vector<TraceNode>> ReadOpenbNodesFile(const std::string& path) {
  Result<std::string> text = ReadWholeFile(path);
  if (!text.ok()) return text.status();
  return ReadOpenbNodes(*text, path);
}

}  // namespace arbiter::trace
