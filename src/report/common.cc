#include "report/common.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace arbiter::report::internal {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

void AddUnique(std::vector<std::string>& names, const std::string& name) {
  if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
}

const sim::ServiceMetrics* FindService(const sim::RunResult& run, const std::string& name) {
  for (const sim::ServiceMetrics& service : run.services) {
    if (service.name == name) return &service;
  }
  return nullptr;
}

std::string Count(std::int64_t value) { return fmt::format("{}", value); }

std::string Completed(const sim::GroupMetrics& group) {
  return fmt::format("{} / {}", group.jobs_completed, group.jobs_submitted);
}

std::string WaitP99(const sim::GroupMetrics& group) {
  return group.wait.count > 0 ? FormatSeconds(group.wait.p99) : kMissing;
}

// A statistic of a distribution in seconds; "-" when it is empty.
std::string Stat(const sim::Distribution& d, double seconds) {
  return d.count > 0 ? FormatSeconds(seconds) : kMissing;
}

// The latency window of a service across runs (they share the simulator's options).
std::string ServiceWindowName(std::span<const sim::RunResult> runs, const std::string& name) {
  for (const sim::RunResult& run : runs) {
    const sim::ServiceMetrics* s = FindService(run, name);
    if (s != nullptr && s->latency_window > 0) return WindowName(s->latency_window);
  }
  return WindowName(3600 * kMillisPerSecond);
}

std::string Hours(double gpu_hours) {
  return Finite(gpu_hours) ? FormatNumber(gpu_hours) : kMissing;
}

}  // namespace

bool Finite(double value) { return std::isfinite(value); }

std::string FormatSeconds(double seconds) {
  if (!Finite(seconds)) return kMissing;
  const double magnitude = std::abs(seconds);
  if (magnitude == 0) return "0 s";
  if (magnitude < 1) return fmt::format("{:.0f} ms", seconds * 1000);
  if (magnitude < 9.95) return fmt::format("{:.1f} s", seconds);
  if (magnitude < 59.5) return fmt::format("{:.0f} s", seconds);
  if (magnitude < 3600) return fmt::format("{:.1f} min", seconds / 60);
  if (magnitude < 48 * 3600) return fmt::format("{:.1f} h", seconds / 3600);
  return fmt::format("{:.1f} d", seconds / 86400);
}

std::string FormatMillis(double millis) {
  if (!Finite(millis)) return kMissing;
  const double magnitude = std::abs(millis);
  if (magnitude == 0) return "0 ms";
  if (magnitude < 9.95) return fmt::format("{:.1f} ms", millis);
  if (magnitude < 999.5) return fmt::format("{:.0f} ms", millis);
  return FormatSeconds(millis / 1000);
}

std::string FormatPercent(double fraction) {
  if (!Finite(fraction)) return kMissing;
  return fmt::format("{:.1f} %", fraction * 100);
}

std::string FormatNumber(double value) {
  if (!Finite(value)) return kMissing;
  if (std::abs(value - std::round(value)) < 0.05) return fmt::format("{:.0f}", value);
  return fmt::format("{:.1f}", value);
}

bool Selection::Has(const sim::JobRecord& job) const {
  switch (by) {
    case By::kAll:
      return true;
    case By::kQueue:
      return job.queue == name;
    case By::kClass:
      return job.priority_class == name;
    case By::kWorkload:
      return job.workload == name;
  }
  return false;
}

bool Selection::Has(const sim::RunResult& run, const sim::ServiceMetrics& service) const {
  switch (by) {
    case By::kAll:
      return true;
    case By::kQueue:
      return service.queue == name;
    case By::kWorkload:
      return service.name == name;
    case By::kClass:
      for (const sim::JobRecord& job : run.jobs) {
        if (job.kind == sim::WorkKind::kInference && job.workload == service.name) {
          return job.priority_class == name;
        }
      }
      return false;
  }
  return false;
}

double MaxServiceP50Ms(const sim::RunResult& run, const Selection& in) {
  double worst = 0;
  for (const sim::ServiceMetrics& service : run.services) {
    if (in.Has(run, service) && Finite(service.latency_p50_ms)) {
      worst = std::max(worst, service.latency_p50_ms);
    }
  }
  return worst;
}

double MaxServiceP99Ms(const sim::RunResult& run, const Selection& in) {
  double worst = 0;
  for (const sim::ServiceMetrics& service : run.services) {
    if (in.Has(run, service) && Finite(service.latency_p99_ms)) {
      worst = std::max(worst, service.latency_p99_ms);
    }
  }
  return worst;
}

double TotalSloMissMinutes(const sim::RunResult& run, const Selection& in) {
  double total = 0;
  for (const sim::ServiceMetrics& service : run.services) {
    if (in.Has(run, service) && Finite(service.slo_miss_minutes)) {
      total += service.slo_miss_minutes;
    }
  }
  return total;
}

double MaxServiceP99WorstWindowMs(const sim::RunResult& run, const Selection& in) {
  double worst = 0;
  for (const sim::ServiceMetrics& service : run.services) {
    if (in.Has(run, service) && Finite(service.latency_p99_worst_window_ms)) {
      worst = std::max(worst, service.latency_p99_worst_window_ms);
    }
  }
  return worst;
}

std::int64_t TotalWindowsOverSlo(const sim::RunResult& run, const Selection& in) {
  std::int64_t total = 0;
  for (const sim::ServiceMetrics& service : run.services) {
    if (in.Has(run, service)) total += service.windows_over_slo;
  }
  return total;
}

std::string WindowName(Millis window) {
  if (window == 3600 * kMillisPerSecond) return "hour";
  return FormatSeconds(static_cast<double>(window) / static_cast<double>(kMillisPerSecond)) +
         " window";
}

std::optional<double> TrainingJctMeanS(const sim::RunResult& run, const Selection& in) {
  double sum = 0;
  std::int64_t count = 0;
  for (const sim::JobRecord& job : run.jobs) {
    if (job.kind != sim::WorkKind::kTraining || job.end < 0 || !in.Has(job)) continue;
    sum += static_cast<double>(job.end - job.submit) / static_cast<double>(kMillisPerSecond);
    ++count;
  }
  if (count == 0) return std::nullopt;
  return sum / static_cast<double>(count);
}

std::vector<std::string> QueueUnion(std::span<const sim::RunResult> runs) {
  std::vector<std::string> names;
  for (const sim::RunResult& run : runs) {
    for (const std::string& name : run.queue_names) AddUnique(names, name);
    for (const auto& [name, group] : run.queues) AddUnique(names, name);
  }
  return names;
}

std::vector<std::string> ServiceUnion(std::span<const sim::RunResult> runs) {
  std::vector<std::string> names;
  for (const sim::RunResult& run : runs) {
    for (const sim::ServiceMetrics& service : run.services) AddUnique(names, service.name);
  }
  return names;
}

std::vector<Row> HeadlineRows(std::span<const sim::RunResult> runs) {
  std::vector<Row> rows;
  auto add = [&](std::string label, auto&& cell) {
    Row row{std::move(label), {}, false, false};
    for (const sim::RunResult& run : runs) row.cells.push_back(cell(run));
    rows.push_back(std::move(row));
  };
  add("GPU utilisation", [](const sim::RunResult& r) { return FormatPercent(r.gpu_utilization); });
  add("GPU allocation", [](const sim::RunResult& r) { return FormatPercent(r.gpu_allocation); });

  const std::vector<std::string> services = ServiceUnion(runs);
  if (services.empty()) {
    add("inference latency", [](const sim::RunResult&) { return std::string(kMissing); });
  }
  for (const std::string& name : services) {
    add("latency P50 " + name, [&](const sim::RunResult& r) {
      const sim::ServiceMetrics* s = FindService(r, name);
      return s != nullptr ? FormatMillis(s->latency_p50_ms) : kMissing;
    });
    add("latency P99 " + name, [&](const sim::RunResult& r) {
      const sim::ServiceMetrics* s = FindService(r, name);
      return s != nullptr ? FormatMillis(s->latency_p99_ms) : kMissing;
    });
    const std::string window = ServiceWindowName(runs, name);
    add("latency P99 worst " + window + " " + name, [&](const sim::RunResult& r) {
      const sim::ServiceMetrics* s = FindService(r, name);
      return s != nullptr && !s->latency_p99_by_window_ms.empty()
                 ? FormatMillis(s->latency_p99_worst_window_ms)
                 : kMissing;
    });
    add(window + "s over SLO " + name, [&](const sim::RunResult& r) {
      const sim::ServiceMetrics* s = FindService(r, name);
      return s != nullptr && !s->latency_p99_by_window_ms.empty()
                 ? fmt::format("{} / {}", s->windows_over_slo, s->latency_p99_by_window_ms.size())
                 : kMissing;
    });
    add("SLO miss " + name, [&](const sim::RunResult& r) {
      const sim::ServiceMetrics* s = FindService(r, name);
      return s != nullptr && Finite(s->slo_miss_minutes)
                 ? fmt::format("{:.1f} min", s->slo_miss_minutes)
                 : kMissing;
    });
  }

  add("training JCT mean", [](const sim::RunResult& r) {
    const std::optional<double> mean = TrainingJctMeanS(r);
    return mean ? FormatSeconds(*mean) : kMissing;
  });
  add("training completion mean", [](const sim::RunResult& r) {
    const sim::Distribution& d = r.overall.training_completion;
    return d.count > 0 ? FormatSeconds(d.mean) : kMissing;
  });
  add("JCT mean", [](const sim::RunResult& r) { return Stat(r.overall.jct, r.overall.jct.mean); });
  add("JCT median", [](const sim::RunResult& r) { return Stat(r.overall.jct, r.overall.jct.p50); });
  add("JCT P95", [](const sim::RunResult& r) { return Stat(r.overall.jct, r.overall.jct.p95); });
  add("wait mean",
      [](const sim::RunResult& r) { return Stat(r.overall.wait, r.overall.wait.mean); });
  add("wait median",
      [](const sim::RunResult& r) { return Stat(r.overall.wait, r.overall.wait.p50); });
  add("wait P95", [](const sim::RunResult& r) { return Stat(r.overall.wait, r.overall.wait.p95); });
  add("wait P99", [](const sim::RunResult& r) { return WaitP99(r.overall); });
  add("longest wait",
      [](const sim::RunResult& r) { return FormatSeconds(r.overall.longest_wait_s); });
  add("evictions", [](const sim::RunResult& r) { return Count(r.overall.evictions); });
  add("failures", [](const sim::RunResult& r) { return Count(r.overall.failures); });
  add("GPU-hours lost", [](const sim::RunResult& r) { return Hours(r.overall.gpu_hours_lost); });
  add("jobs completed", [](const sim::RunResult& r) { return Completed(r.overall); });

  for (const std::string& queue : QueueUnion(runs)) {
    rows.push_back(Row{"queue " + queue, {}, true, false});
    auto add_queue = [&](std::string label, auto&& cell) {
      Row row{std::move(label), {}, false, true};
      for (const sim::RunResult& run : runs) {
        const auto it = run.queues.find(queue);
        row.cells.push_back(it != run.queues.end() ? cell(it->second) : std::string(kMissing));
      }
      rows.push_back(std::move(row));
    };
    add_queue("jobs completed", [](const sim::GroupMetrics& g) { return Completed(g); });
    add_queue("wait P99", [](const sim::GroupMetrics& g) { return WaitP99(g); });
    add_queue("mean GPUs / guarantee", [](const sim::GroupMetrics& g) {
      std::string text = FormatNumber(g.mean_gpus) + " / " + FormatNumber(g.guarantee_gpus);
      if (g.guarantee_gpus > 0 && Finite(g.mean_gpus)) {
        text += fmt::format(" ({:.0f} %)", g.mean_gpus / g.guarantee_gpus * 100);
      }
      return text;
    });
    add_queue("evictions", [](const sim::GroupMetrics& g) { return Count(g.evictions); });
    add_queue("GPU-hours lost", [](const sim::GroupMetrics& g) { return Hours(g.gpu_hours_lost); });
  }
  return rows;
}

std::string HtmlEscape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::vector<Point> Downsample(std::span<const Point> points, std::size_t max_points,
                              Reduce reduce) {
  if (points.size() <= max_points || max_points == 0) {
    return std::vector<Point>(points.begin(), points.end());
  }
  std::vector<Point> out;
  out.reserve(max_points);
  const std::size_t n = points.size();
  for (std::size_t bucket = 0; bucket < max_points; ++bucket) {
    const std::size_t begin = bucket * n / max_points;
    const std::size_t end = (bucket + 1) * n / max_points;
    if (begin >= end) continue;
    if (reduce == Reduce::kMean) {
      double x_sum = 0;
      double y_sum = 0;
      std::size_t finite = 0;
      for (std::size_t i = begin; i < end; ++i) {
        x_sum += points[i].x;
        if (Finite(points[i].y)) {
          y_sum += points[i].y;
          ++finite;
        }
      }
      out.push_back(Point{x_sum / static_cast<double>(end - begin),
                          finite > 0 ? y_sum / static_cast<double>(finite) : kNaN});
    } else {
      Point best{points[begin].x, kNaN};
      for (std::size_t i = begin; i < end; ++i) {
        if (Finite(points[i].y) && !(Finite(best.y) && best.y >= points[i].y)) best = points[i];
      }
      out.push_back(best);
    }
  }
  return out;
}

}  // namespace arbiter::report::internal
