// Internal to the trace readers: a small CSV table reader and the field parsers every format
// shares. Problems are strings naming the column, e.g. `num_gpus: not a number: "x"`; an empty
// string means success.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "arbiter/quantity.h"
#include "arbiter/status.h"
#include "job/limits.h"
#include "trace/trace.h"

namespace arbiter::trace::internal {

// One non-blank data line, split into fields (quotes removed, unquoted fields trimmed).
struct CsvRow {
  std::int64_t line = 0;  // 1-based
  std::vector<std::string> fields;
};

// A CSV text: its header and its data rows. Rows whose field count differs from the header's, or
// that have a broken quote, are not in `rows` but in `bad_rows`.
struct CsvTable {
  std::string file_name;
  std::int64_t header_line = 0;
  std::vector<std::string> header;
  std::vector<CsvRow> rows;
  std::vector<BadRow> bad_rows;

  // The index of column `name` in the header, or -1.
  int Column(std::string_view name) const;
  // Like Column, but a missing column fails with `FILE:LINE: missing column "name"`.
  Result<int> Require(std::string_view name) const;
};

// Splits `text` into lines ('\n', with an optional '\r' before it), skips blank lines and a UTF-8
// byte order mark, and reads the first non-blank line as the header. Fails when there is no
// header or the header names a column twice or leaves one unnamed. `separator` separates fields
// (sacct: '|'). With `implicit_header`, a first line whose first field is not the implicit
// header's first name is data, read with the implicit header (files written without a header).
Result<CsvTable> ParseCsv(std::string_view text, const std::string& file_name, char separator = ',',
                          const std::vector<std::string>* implicit_header = nullptr);

// Splits one line into fields. Fields may be quoted ("a,b"; "" is a quote inside quotes); quoted
// fields cannot span lines. Returns false on a broken quote.
bool SplitCsvLine(std::string_view line, std::vector<std::string>* fields, char separator = ',');

std::string_view Trim(std::string_view text);
// `FILE:LINE: problem`.
Status LineError(const std::string& file_name, std::int64_t line, const std::string& problem);
// `"text"`, cut short when long, for problems.
std::string Quote(std::string_view text);

// The largest whole number a reader accepts in a count (GPUs of a job, tasks): the limits of
// every reader of jobs (job/limits.h).
inline constexpr std::int64_t kMaxCount = limits::kMaxGpusPerJob;
static_assert(limits::kMaxGpusPerJob == limits::kMaxTasksPerJob);
// The largest time in seconds a reader accepts (about 31,700 years).
inline constexpr std::int64_t kMaxSeconds = limits::kMaxDuration / kMillisPerSecond;

// Numbers are parsed as exact decimals, never through floating point.
// A whole number in [min, max] ("66.0" and "1e3" are whole). `column` names the field in the
// problem.
std::string ParseInt(std::string_view column, std::string_view text, std::int64_t min,
                     std::int64_t max, std::int64_t* out);
// A non-negative number of seconds (decimals and exponents allowed) as milliseconds, rounded to
// the nearest (half up).
std::string ParseSeconds(std::string_view column, std::string_view text, Millis* out);
// A non-negative decimal number of units as thousandths ("0.5" -> 500, "2" -> 2000); with
// `allow_milli_suffix`, "500m" is 500 thousandths. Finer than a thousandth is a problem.
std::string ParseMilli(std::string_view column, std::string_view text, bool allow_milli_suffix,
                       std::int64_t* out);
// The non-empty, trimmed parts of a '|'-separated list.
std::vector<std::string> SplitList(std::string_view text);

// A whole-GPU request in milli-GPU and its task count from a trace's GPU count, as
// `options.split` says: kGpu, one task per GPU; kNode, `nodes` tasks when the trace gives a node
// count (above 0) that divides `gpus` into tasks that fit a node, else GpusPerTask. Sets tasks=1
// and 0 GPUs when `gpus` is 0.
void SplitGpus(std::int64_t gpus, std::int64_t nodes, const ReadOptions& options, TraceJob* job);

// The kind of a problem, for the error cap: the problem up to the row's own value (its first
// quote), e.g. `num_gpu: not a number` for `num_gpu: not a number: "x"`.
std::string ProblemKind(std::string_view problem);

// Counts a row left out on purpose under `reason` (Trace::skipped).
void Skip(Trace* trace, std::string_view reason, std::int64_t line);

// Moves the jobs outside the limits of every reader of jobs (job/limits.h) to the bad rows,
// makes submit times relative to the earliest one, sorts the jobs stably by submit time, sorts
// the bad rows by line and keeps the first `options.max_bad_rows_per_kind` of each kind, counting
// the rest (the one error cap of every reader).
void Finish(Trace* trace, const ReadOptions& options);

}  // namespace arbiter::trace::internal
