// Shared pieces of the report writers: human-friendly units, derived run metrics, the rows of the
// headline comparison (terminal table and HTML) and escaping.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sim/sim.h"

namespace arbiter::report::internal {

inline constexpr const char* kMissing = "-";

bool Finite(double value);

// Durations in seconds: "812 ms", "4.5 s", "45 s", "12.5 min", "3.2 h", "4.1 d"; "-" when not
// finite.
std::string FormatSeconds(double seconds);
// Latencies in milliseconds: "0.8 ms", "812 ms", then as FormatSeconds.
std::string FormatMillis(double millis);
// A fraction as a percentage with one decimal: 0.723 -> "72.3 %".
std::string FormatPercent(double fraction);
// A quantity (GPUs, GPU-hours): whole numbers without decimals, otherwise one decimal.
std::string FormatNumber(double value);

// Which services and jobs a figure covers: all of them, or those of one queue, priority class
// or workload (a service belongs to the class of its replicas).
struct Selection {
  enum class By : std::uint8_t { kAll, kQueue, kClass, kWorkload } by = By::kAll;
  std::string name;
  bool Has(const sim::JobRecord& job) const;
  bool Has(const sim::RunResult& run, const sim::ServiceMetrics& service) const;
};

// Figures derived from the services and the job records of a selection.
double MaxServiceP50Ms(const sim::RunResult& run, const Selection& in = {});  // 0 without
double MaxServiceP99Ms(const sim::RunResult& run, const Selection& in = {});  // 0 without
double TotalSloMissMinutes(const sim::RunResult& run, const Selection& in = {});
// The worst latency window's P99 over the services (0 without), and the windows whose P99
// exceeded their service's SLO, summed over the services.
double MaxServiceP99WorstWindowMs(const sim::RunResult& run, const Selection& in = {});
std::int64_t TotalWindowsOverSlo(const sim::RunResult& run, const Selection& in = {});
// A latency window for labels: "hour" for one hour, else its duration ("10.0 min window").
std::string WindowName(Millis window);
// Mean completion - submit of completed training jobs, in seconds; none when no training job
// completed.
std::optional<double> TrainingJctMeanS(const sim::RunResult& run, const Selection& in = {});

// Queue names of all runs (each run's queue_names, then its metric queues), first seen first.
std::vector<std::string> QueueUnion(std::span<const sim::RunResult> runs);
// Service names of all runs, first seen first.
std::vector<std::string> ServiceUnion(std::span<const sim::RunResult> runs);

// One row of the headline comparison: a label and one cell per run; a heading row has no cells.
struct Row {
  std::string label;
  std::vector<std::string> cells;
  bool heading = false;
  bool indented = false;
};
std::vector<Row> HeadlineRows(std::span<const sim::RunResult> runs);

// &, <, >, " and ' as character references.
std::string HtmlEscape(std::string_view text);

struct Point {
  double x = 0;
  double y = 0;
};
enum class Reduce { kMean, kMax };
// At most `max_points` points: consecutive points in equal buckets, each reduced to the mean
// (x and y) or to its point of largest y. Non-finite values are skipped; a bucket of nothing but
// non-finite values yields a non-finite y (a gap).
std::vector<Point> Downsample(std::span<const Point> points, std::size_t max_points, Reduce reduce);

}  // namespace arbiter::report::internal
