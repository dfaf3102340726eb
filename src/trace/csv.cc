#include "trace/csv.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <system_error>
#include <unordered_map>

#include "job/limits.h"

namespace arbiter::trace::internal {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t'; }

// A decimal number ("66", "0.5", "-3", "1e-05", "2.5E+3") in thousandths, exactly: digits past
// the third decimal are not lost but reported through `exact` and `round_up`.
struct Decimal {
  bool negative = false;
  std::int64_t thousandths = 0;  // truncated towards zero
  bool exact = true;             // no non-zero digit past the third decimal
  bool round_up = false;         // the first digit past the third decimal is 5 or more
};
enum class DecimalKind : std::uint8_t { kOk, kNotANumber, kOutOfRange };

DecimalKind ParseDecimal(std::string_view text, Decimal* out) {
  Decimal decimal;
  std::size_t i = 0;
  if (i < text.size() && (text[i] == '-' || text[i] == '+')) decimal.negative = text[i++] == '-';
  std::string digits;      // integer then fraction digits
  std::int64_t point = 0;  // where the decimal point sits in `digits`
  bool any_digit = false, seen_point = false;
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (c >= '0' && c <= '9') {
      any_digit = true;
      if (digits.empty() && c == '0' && !seen_point) continue;  // leading zeros
      digits += c;
      if (!seen_point) ++point;
    } else if (c == '.' && !seen_point) {
      seen_point = true;
    } else {
      break;
    }
  }
  if (!any_digit) return DecimalKind::kNotANumber;
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    bool exponent_negative = false;
    if (i < text.size() && (text[i] == '-' || text[i] == '+')) exponent_negative = text[i++] == '-';
    std::int64_t exponent = 0;
    bool exponent_digit = false;
    for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
      exponent_digit = true;
      exponent = std::min<std::int64_t>(exponent * 10 + (text[i] - '0'), 100000);
    }
    if (!exponent_digit) return DecimalKind::kNotANumber;
    point += exponent_negative ? -exponent : exponent;
  }
  if (i != text.size()) return DecimalKind::kNotANumber;
  // The thousandths are the digits before point + 3; the rest decide exactness and rounding.
  const std::int64_t cut = point + 3;
  for (std::int64_t d = 0; d < std::max<std::int64_t>(cut, 0); ++d) {
    if (decimal.thousandths > std::numeric_limits<std::int64_t>::max() / 100) {
      return DecimalKind::kOutOfRange;
    }
    const char digit = d < static_cast<std::int64_t>(digits.size()) ? digits[d] : '0';
    decimal.thousandths = decimal.thousandths * 10 + (digit - '0');
  }
  for (std::int64_t d = std::max<std::int64_t>(cut, 0);
       d < static_cast<std::int64_t>(digits.size()); ++d) {
    if (d == cut && digits[d] >= '5') decimal.round_up = true;
    if (digits[d] != '0') decimal.exact = false;
  }
  if (decimal.thousandths == 0 && decimal.exact) decimal.negative = false;  // "-0"
  *out = decimal;
  return DecimalKind::kOk;
}

std::string Problem(std::string_view column, std::string_view what, std::string_view text) {
  std::string problem(column);
  problem += ": ";
  problem += what;
  if (!text.empty()) {
    problem += ": ";
    problem += Quote(text);
  }
  return problem;
}

}  // namespace

std::string_view Trim(std::string_view text) {
  while (!text.empty() && (IsSpace(text.front()) || text.front() == '\r')) text.remove_prefix(1);
  while (!text.empty() && (IsSpace(text.back()) || text.back() == '\r')) text.remove_suffix(1);
  return text;
}

Status LineError(const std::string& file_name, std::int64_t line, const std::string& problem) {
  return Status::InvalidArgument(file_name + ":" + std::to_string(line) + ": " + problem);
}

std::string Quote(std::string_view text) {
  constexpr std::size_t kMax = 60;
  std::string quoted = "\"";
  if (text.size() > kMax) {
    quoted += text.substr(0, kMax - 3);
    quoted += "...";
  } else {
    quoted += text;
  }
  quoted += '"';
  return quoted;
}

bool SplitCsvLine(std::string_view line, std::vector<std::string>* fields, char separator) {
  fields->clear();
  std::size_t i = 0;
  const std::size_t n = line.size();
  while (true) {
    while (i < n && IsSpace(line[i])) ++i;
    std::string field;
    if (i < n && line[i] == '"') {
      ++i;
      bool closed = false;
      while (i < n) {
        if (line[i] == '"') {
          if (i + 1 < n && line[i + 1] == '"') {
            field += '"';
            i += 2;
            continue;
          }
          closed = true;
          ++i;
          break;
        }
        field += line[i++];
      }
      if (!closed) return false;
      while (i < n && IsSpace(line[i])) ++i;
      if (i < n && line[i] != separator) return false;  // text after the closing quote
    } else {
      const std::size_t start = i;
      while (i < n && line[i] != separator) ++i;
      field = std::string(Trim(line.substr(start, i - start)));
    }
    fields->push_back(std::move(field));
    if (i >= n) return true;
    ++i;  // the separator
  }
}

int CsvTable::Column(std::string_view name) const {
  for (std::size_t i = 0; i < header.size(); ++i) {
    if (header[i] == name) return static_cast<int>(i);
  }
  return -1;
}

Result<int> CsvTable::Require(std::string_view name) const {
  const int column = Column(name);
  if (column < 0) {
    return LineError(file_name, header_line, "missing column " + Quote(name));
  }
  return column;
}

Result<CsvTable> ParseCsv(std::string_view text, const std::string& file_name, char separator,
                          const std::vector<std::string>* implicit_header) {
  CsvTable table;
  table.file_name = file_name;
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);  // UTF-8 byte order mark
  std::int64_t line_number = 0;
  std::vector<std::string> fields;
  while (!text.empty()) {
    ++line_number;
    const std::size_t newline = text.find('\n');
    std::string_view line = text.substr(0, newline);
    text.remove_prefix(newline == std::string_view::npos ? text.size() : newline + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (Trim(line).empty()) continue;

    const bool split = SplitCsvLine(line, &fields, separator);
    if (table.header_line == 0 && implicit_header != nullptr && !implicit_header->empty() &&
        (!split || fields.empty() || fields.front() != implicit_header->front())) {
      table.header_line = line_number;  // no header: errors about columns name the first line
      table.header = *implicit_header;
    }
    if (table.header_line == 0) {
      table.header_line = line_number;
      if (!split) return LineError(file_name, line_number, "header: unterminated quote");
      for (std::size_t i = 0; i < fields.size(); ++i) {
        if (fields[i].empty()) {
          return LineError(file_name, line_number,
                           "header: column " + std::to_string(i + 1) + " has no name");
        }
        if (std::find(fields.begin(), fields.begin() + static_cast<std::ptrdiff_t>(i), fields[i]) !=
            fields.begin() + static_cast<std::ptrdiff_t>(i)) {
          return LineError(file_name, line_number,
                           "header: column " + Quote(fields[i]) + " appears twice");
        }
      }
      table.header = fields;
      continue;
    }
    if (!split) {
      table.bad_rows.push_back({line_number, "unterminated quote"});
    } else if (fields.size() != table.header.size()) {
      table.bad_rows.push_back({line_number, "expected " + std::to_string(table.header.size()) +
                                                 " columns, found " +
                                                 std::to_string(fields.size())});
    } else {
      table.rows.push_back({line_number, fields});
    }
  }
  if (table.header_line == 0) {
    return LineError(file_name, 1, "no header line (the text is empty)");
  }
  return table;
}

std::string ParseInt(std::string_view column, std::string_view text, std::int64_t min,
                     std::int64_t max, std::int64_t* out) {
  if (text.empty()) return Problem(column, "empty", "");
  std::int64_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec == std::errc::result_out_of_range && ptr == end) {
    return Problem(column, "out of range", text);
  }
  if (ec != std::errc() || ptr != end) {
    Decimal decimal;  // "66.0" or "1e3": a whole number written as a decimal
    switch (ParseDecimal(text, &decimal)) {
      case DecimalKind::kOk:
        break;
      case DecimalKind::kOutOfRange:
        return Problem(column, "out of range", text);
      case DecimalKind::kNotANumber:
        return Problem(column, "not a number", text);
    }
    if (!decimal.exact || decimal.thousandths % 1000 != 0) {
      return Problem(column, "not a whole number", text);
    }
    value = (decimal.negative ? -1 : 1) * (decimal.thousandths / 1000);
  }
  if (value < min) {
    return Problem(column, min == 0 ? "negative" : "must be at least " + std::to_string(min), text);
  }
  if (value > max) return Problem(column, "must be at most " + std::to_string(max), text);
  *out = value;
  return {};
}

std::string ParseThousandths(std::string_view column, std::string_view text, bool round,
                             std::int64_t max, std::int64_t* out) {
  if (text.empty()) return Problem(column, "empty", "");
  Decimal decimal;
  switch (ParseDecimal(text, &decimal)) {
    case DecimalKind::kOk:
      break;
    case DecimalKind::kOutOfRange:
      return Problem(column, "out of range", text);
    case DecimalKind::kNotANumber:
      return Problem(column, "not a number", text);
  }
  if (decimal.negative) return Problem(column, "negative", text);
  if (!round && !decimal.exact) return Problem(column, "finer than a thousandth", text);
  const std::int64_t value = decimal.thousandths + (round && decimal.round_up ? 1 : 0);
  if (value > max) return Problem(column, "out of range", text);
  *out = value;
  return {};
}

std::string ParseSeconds(std::string_view column, std::string_view text, Millis* out) {
  return ParseThousandths(column, text, /*round=*/true, kMaxSeconds * kMillisPerSecond, out);
}

std::string ParseMilli(std::string_view column, std::string_view text, bool allow_milli_suffix,
                       std::int64_t* out) {
  if (allow_milli_suffix && !text.empty() && text.back() == 'm') {
    std::int64_t milli = 0;
    std::string problem =
        ParseInt(column, Trim(text.substr(0, text.size() - 1)), 0, kMaxCount * 1000, &milli);
    if (!problem.empty()) {
      // Name the whole field, suffix included.
      if (problem.find("not a") != std::string::npos) return Problem(column, "not a number", text);
      if (problem.find("negative") != std::string::npos) return Problem(column, "negative", text);
      return Problem(column, "out of range", text);
    }
    *out = milli;
    return {};
  }
  return ParseThousandths(column, text, /*round=*/false, kMaxCount * 1000, out);
}

std::vector<std::string> SplitList(std::string_view text) {
  std::vector<std::string> parts;
  while (true) {
    const std::size_t bar = text.find('|');
    std::string_view part = Trim(text.substr(0, bar));
    if (!part.empty()) parts.emplace_back(part);
    if (bar == std::string_view::npos) break;
    text.remove_prefix(bar + 1);
  }
  return parts;
}

void SplitGpus(std::int64_t gpus, std::int64_t nodes, const ReadOptions& options, TraceJob* job) {
  if (gpus <= 0) {
    job->tasks = 1;
    job->gpu_per_task = MilliGpu(0);
    return;
  }
  std::int64_t per_task = 1;
  if (options.split == TaskSplit::kNode) {
    per_task = nodes > 0 && gpus % nodes == 0 && gpus / nodes <= options.gpus_per_node
                   ? gpus / nodes
                   : GpusPerTask(gpus, options.gpus_per_node);
  }
  job->tasks = static_cast<std::int32_t>(gpus / per_task);
  job->gpu_per_task = MilliGpu(per_task * kMilliPerGpu);
}

std::string ProblemKind(std::string_view problem) {
  std::string_view kind = problem.substr(0, problem.find('"'));
  while (!kind.empty() && (kind.back() == ' ' || kind.back() == ':')) kind.remove_suffix(1);
  return std::string(kind);
}

namespace {

// Adds one row of `kind` at `line` to `counts` (found through `index`, kind -> position).
void Count(std::vector<RowCount>* counts, std::unordered_map<std::string, std::size_t>* index,
           std::string kind, std::int64_t line) {
  const auto [it, inserted] = index->emplace(kind, counts->size());
  if (inserted) counts->push_back(RowCount{std::move(kind), 0, line, line});
  RowCount& count = (*counts)[it->second];
  ++count.rows;
  count.first_line = std::min(count.first_line, line);
  count.last_line = std::max(count.last_line, line);
}

}  // namespace

void Skip(Trace* trace, std::string_view reason, std::int64_t line) {
  for (RowCount& count : trace->skipped) {
    if (count.kind == reason) {
      ++count.rows;
      count.first_line = std::min(count.first_line, line);
      count.last_line = std::max(count.last_line, line);
      return;
    }
  }
  trace->skipped.push_back(RowCount{std::string(reason), 1, line, line});
}

namespace {

// A row's job against the limits every reader of jobs shares (job/limits.h): "" when it keeps
// them, else the problem.
std::string CheckLimits(const TraceJob& job) {
  Status s = limits::CheckName("name", job.name, true);
  if (s.ok()) s = limits::CheckName("queue", job.queue, false);
  if (s.ok()) s = limits::CheckName("user", job.user, false);
  if (s.ok()) s = limits::CheckName("priority_class", job.priority_class, false);
  if (s.ok()) s = limits::CheckCount("tasks", job.tasks, 1, limits::kMaxTasksPerJob);
  if (s.ok()) s = limits::CheckTaskGpus("gpus per task", job.gpu_per_task.value());
  if (s.ok()) {
    s = limits::CheckCount("cpu per task", job.cpu_per_task.value(), 0,
                           limits::kMaxCpuMilliPerTask);
  }
  if (s.ok()) {
    s = limits::CheckCount("memory per task", job.memory_per_task.value(), 0,
                           limits::kMaxMemoryMiB);
  }
  if (s.ok()) s = limits::CheckTime("submit", job.submit);
  if (s.ok()) s = limits::CheckDuration("duration", job.duration);
  if (s.ok()) s = limits::CheckDuration("checkpoint_interval", job.checkpoint_interval);
  if (s.ok()) {
    s = limits::CheckCount("gpu models", static_cast<std::int64_t>(job.gpu_models.size()), 0,
                           kMaxGpuTypes);
  }
  for (std::size_t i = 0; s.ok() && i < job.gpu_models.size(); ++i) {
    s = limits::CheckName("gpu model", job.gpu_models[i], true);
  }
  return s.message();
}

}  // namespace

void Finish(Trace* trace, const ReadOptions& options) {
  std::erase_if(trace->jobs, [&](const TraceJob& job) {
    std::string problem = CheckLimits(job);
    if (problem.empty()) return false;
    trace->bad_rows.push_back(BadRow{job.line, std::move(problem)});
    return true;
  });
  if (!trace->jobs.empty()) {
    Millis earliest = std::numeric_limits<Millis>::max();
    for (const TraceJob& job : trace->jobs) earliest = std::min(earliest, job.submit);
    for (TraceJob& job : trace->jobs) job.submit -= earliest;
    std::stable_sort(trace->jobs.begin(), trace->jobs.end(),
                     [](const TraceJob& a, const TraceJob& b) { return a.submit < b.submit; });
  }
  std::stable_sort(trace->bad_rows.begin(), trace->bad_rows.end(),
                   [](const BadRow& a, const BadRow& b) { return a.line < b.line; });
  // The error cap: the first rows of each kind stay listed, the others are counted.
  trace->bad_row_count += static_cast<std::int64_t>(trace->bad_rows.size());
  std::vector<RowCount> listed;
  std::unordered_map<std::string, std::size_t> listed_index, more_index;
  std::vector<BadRow> kept;
  for (BadRow& row : trace->bad_rows) {
    std::string kind = ProblemKind(row.problem);
    const auto found = listed_index.find(kind);
    const std::int64_t seen = found == listed_index.end() ? 0 : listed[found->second].rows;
    if (options.max_bad_rows_per_kind <= 0 || seen < options.max_bad_rows_per_kind) {
      Count(&listed, &listed_index, std::move(kind), row.line);
      kept.push_back(std::move(row));
    } else {
      Count(&trace->more_bad_rows, &more_index, std::move(kind), row.line);
    }
  }
  trace->bad_rows = std::move(kept);
  std::stable_sort(
      trace->skipped.begin(), trace->skipped.end(),
      [](const RowCount& a, const RowCount& b) { return a.first_line < b.first_line; });
}

}  // namespace arbiter::trace::internal
