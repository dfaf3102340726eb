// The Parallel Workloads Archive's Standard Workload Format: `;` header comments, then one job a
// line of 18 whitespace-separated numbers, -1 for unknown.
#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "trace/csv.h"
#include "trace/readers.h"

namespace arbiter::trace::internal {
namespace {

constexpr std::size_t kSwfFields = 18;

// The fields read, 0-based, with the names the problems give them (the standard's, with its
// 1-based field number).
enum SwfField : std::size_t {
  kJobNumber = 0,
  kSubmitTime = 1,
  kRunTime = 3,
  kAllocatedProcessors = 4,
  kRequestedProcessors = 7,
  kStatus = 10,
  kUserId = 11,
  kQueueNumber = 14,
};
std::string FieldName(std::size_t field) {
  switch (field) {
    case kJobNumber:
      return "job number (field 1)";
    case kSubmitTime:
      return "submit time (field 2)";
    case kRunTime:
      return "run time (field 4)";
    case kAllocatedProcessors:
      return "allocated processors (field 5)";
    case kRequestedProcessors:
      return "requested processors (field 8)";
    case kStatus:
      return "status (field 11)";
    case kUserId:
      return "user id (field 12)";
    case kQueueNumber:
      return "queue number (field 15)";
    default:
      return "field " + std::to_string(field + 1);
  }
}

// Splits at spaces and tabs.
std::vector<std::string_view> Words(std::string_view line) {
  std::vector<std::string_view> words;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
    const std::size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t' && line[i] != '\r') ++i;
    if (i > start) words.push_back(line.substr(start, i - start));
  }
  return words;
}

// `; Queue: 1 batch` defines queue 1's name.
void ReadQueueComment(std::string_view comment, std::map<std::int64_t, std::string>* queues) {
  comment = Trim(comment.substr(1));
  constexpr std::string_view kKey = "Queue:";
  if (comment.substr(0, kKey.size()) != kKey) return;
  const std::vector<std::string_view> words = Words(comment.substr(kKey.size()));
  std::int64_t number = 0;
  if (words.size() >= 2 && ParseInt("queue", words[0], 0, kMaxCount, &number).empty()) {
    (*queues)[number] = std::string(words[1]);
  }
}

}  // namespace

Result<Trace> ReadSwf(std::string_view text, const std::string& file_name,
                      const ReadOptions& options) {
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
  Trace trace;
  std::map<std::int64_t, std::string> queues;  // from `; Queue:` comments
  std::int64_t line_number = 0;
  bool any_job_line = false;
  while (!text.empty()) {
    ++line_number;
    const std::size_t newline = text.find('\n');
    const std::string_view line = Trim(text.substr(0, newline));
    text.remove_prefix(newline == std::string_view::npos ? text.size() : newline + 1);
    if (line.empty()) continue;
    if (line.front() == ';') {
      ReadQueueComment(line, &queues);
      continue;
    }
    any_job_line = true;
    const std::vector<std::string_view> words = Words(line);
    if (words.size() != kSwfFields) {
      trace.bad_rows.push_back({line_number, "expected " + std::to_string(kSwfFields) +
                                                 " fields, found " + std::to_string(words.size())});
      continue;
    }
    // Whole numbers of at least -1 (unknown), except the two times, which may have decimals.
    std::array<std::int64_t, kSwfFields> value{};
    std::string problem;
    for (std::size_t f :
         {kJobNumber, kAllocatedProcessors, kRequestedProcessors, kStatus, kUserId, kQueueNumber}) {
      problem = ParseInt(FieldName(f), words[f], -1, kMaxSeconds, &value[f]);
      if (!problem.empty()) break;
    }
    TraceJob job;
    job.line = line_number;
    if (problem.empty())
      problem = ParseSeconds(FieldName(kSubmitTime), words[kSubmitTime], &job.submit);
    const bool run_time_unknown = words[kRunTime] == "-1";
    if (problem.empty() && !run_time_unknown) {
      problem = ParseSeconds(FieldName(kRunTime), words[kRunTime], &job.duration);
    }
    if (!problem.empty()) {
      trace.bad_rows.push_back({line_number, std::move(problem)});
      continue;
    }
    const std::int64_t processors =
        value[kAllocatedProcessors] > 0 ? value[kAllocatedProcessors] : value[kRequestedProcessors];
    const bool cancelled = value[kStatus] == 5;
    if (cancelled && (run_time_unknown || job.duration == 0 || processors <= 0)) {
      Skip(&trace, "cancelled before it ran (status 5, no run time or processors)", line_number);
      continue;
    }
    if (run_time_unknown) {
      trace.bad_rows.push_back({line_number, FieldName(kRunTime) + ": unknown (-1)"});
      continue;
    }
    if (processors <= 0) {
      trace.bad_rows.push_back(
          {line_number, FieldName(kAllocatedProcessors) +
                            ": no processors (neither allocated nor requested processors given): " +
                            Quote(words[kAllocatedProcessors])});
      continue;
    }
    job.name = std::string(words[kJobNumber]);
    if (value[kUserId] >= 0) job.user = "user-" + std::to_string(value[kUserId]);
    if (value[kQueueNumber] >= 0) {
      const auto queue = queues.find(value[kQueueNumber]);
      job.queue =
          queue != queues.end() ? queue->second : "queue-" + std::to_string(value[kQueueNumber]);
    }
    const std::int64_t gpus =
        (processors + options.processors_per_gpu - 1) / options.processors_per_gpu;
    if (gpus > kMaxCount) {
      trace.bad_rows.push_back({line_number, FieldName(kAllocatedProcessors) + ": more than " +
                                                 std::to_string(kMaxCount) +
                                                 " GPUs: " + std::to_string(processors)});
      continue;
    }
    SplitGpus(gpus, 0, options, &job);
    trace.jobs.push_back(std::move(job));
  }
  if (!any_job_line && line_number == 0) {
    return LineError(file_name, 1, "no job line (the text is empty)");
  }
  return trace;
}

}  // namespace arbiter::trace::internal
