// Microsoft Philly as prepared by Pollux: timestamp,duration,num_gpus,gpu_time,cluster.
#include <cstdint>
#include <string>

#include "trace/csv.h"
#include "trace/readers.h"

namespace arbiter::trace::internal {
namespace {

// Days from 1970-01-01 to year-month-day in the proleptic Gregorian calendar (H. Hinnant's
// days_from_civil).
std::int64_t DaysFromCivil(std::int64_t year, std::int64_t month, std::int64_t day) {
  year -= month <= 2 ? 1 : 0;
  const std::int64_t era = (year >= 0 ? year : year - 399) / 400;
  const std::int64_t year_of_era = year - era * 400;  // [0, 399]
  const std::int64_t day_of_year = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1;
  const std::int64_t day_of_era =
      year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;  // [0, 146096]
  return era * 146097 + day_of_era - 719468;
}

bool IsLeap(std::int64_t year) { return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0; }

std::int64_t DaysInMonth(std::int64_t year, std::int64_t month) {
  constexpr std::int64_t kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return month == 2 && IsLeap(year) ? 29 : kDays[month - 1];
}

// `digits` decimal digits at text[at...]; false when any is not a digit.
bool Digits(std::string_view text, std::size_t at, std::size_t digits, std::int64_t* out) {
  std::int64_t value = 0;
  for (std::size_t i = at; i < at + digits; ++i) {
    if (text[i] < '0' || text[i] > '9') return false;
    value = value * 10 + (text[i] - '0');
  }
  *out = value;
  return true;
}

}  // namespace

bool ParseUtcTimestamp(std::string_view text, Millis* out) {
  // 0123456789012345678
  // YYYY-MM-DD HH:MM:SS
  if (text.size() != 19 || text[4] != '-' || text[7] != '-' ||
      (text[10] != ' ' && text[10] != 'T') || text[13] != ':' || text[16] != ':') {
    return false;
  }
  std::int64_t year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  if (!Digits(text, 0, 4, &year) || !Digits(text, 5, 2, &month) || !Digits(text, 8, 2, &day) ||
      !Digits(text, 11, 2, &hour) || !Digits(text, 14, 2, &minute) ||
      !Digits(text, 17, 2, &second)) {
    return false;
  }
  if (month < 1 || month > 12 || day < 1 || day > DaysInMonth(year, month) || hour > 23 ||
      minute > 59 || second > 59) {
    return false;
  }
  const std::int64_t seconds =
      DaysFromCivil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second;
  *out = seconds * kMillisPerSecond;
  return true;
}

std::string TimestampProblem(std::string_view column, std::string_view text) {
  if (text.empty()) return std::string(column) + ": empty";
  return std::string(column) + ": not a date and time (YYYY-MM-DD HH:MM:SS): " + Quote(text);
}

Result<Trace> ReadPhilly(std::string_view text, const std::string& file_name,
                         const ReadOptions& options) {
  Result<CsvTable> table = ParseCsv(text, file_name);
  if (!table.ok()) return table.status();
  Result<int> timestamp = table->Require("timestamp");
  if (!timestamp.ok()) return timestamp.status();
  Result<int> duration = table->Require("duration");
  if (!duration.ok()) return duration.status();
  Result<int> num_gpus = table->Require("num_gpus");
  if (!num_gpus.ok()) return num_gpus.status();
  const int cluster = table->Column("cluster");

  Trace trace;
  trace.bad_rows = std::move(table->bad_rows);
  for (const CsvRow& row : table->rows) {
    TraceJob job;
    job.name = "philly-" + std::to_string(row.line);
    job.line = row.line;
    const std::string& stamp = row.fields[*timestamp];
    std::string problem;
    if (!ParseUtcTimestamp(stamp, &job.submit)) problem = TimestampProblem("timestamp", stamp);
    if (problem.empty()) problem = ParseSeconds("duration", row.fields[*duration], &job.duration);
    std::int64_t gpus = 0;
    if (problem.empty()) problem = ParseInt("num_gpus", row.fields[*num_gpus], 1, kMaxCount, &gpus);
    if (!problem.empty()) {
      trace.bad_rows.push_back({row.line, std::move(problem)});
      continue;
    }
    SplitGpus(gpus, 0, options, &job);
    if (cluster >= 0) job.queue = row.fields[cluster];
    trace.jobs.push_back(std::move(job));
  }
  return trace;
}

}  // namespace arbiter::trace::internal
