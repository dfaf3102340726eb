// The HTML report: one self-contained page (inline CSS, inline SVG, no script, no external
// resource) with the headline table and line charts of every run.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "report/common.h"
#include "report/report.h"

namespace arbiter::report {
namespace {

using internal::Finite;
using internal::HtmlEscape;
using internal::Point;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr std::size_t kMaxPoints = 600;  // per line
constexpr double kSecond = static_cast<double>(kMillisPerSecond);

// Tableau 10: distinct on white and for the common colour-vision deficiencies.
constexpr const char* kColors[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                   "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
constexpr std::size_t kColorCount = sizeof(kColors) / sizeof(kColors[0]);

// Each run also has its own dash pattern, so that lines of runs that overlap stay apart (a dashed
// line over a solid one shows both colours) and the colours need not be told apart at all.
constexpr const char* kDashes[] = {"", "9 4", "2 3", "12 3 3 3", "5 5", "1 5", "14 5"};
constexpr std::size_t kDashCount = sizeof(kDashes) / sizeof(kDashes[0]);

const char* Color(std::size_t run) { return kColors[run % kColorCount]; }
std::string Dash(std::size_t run) {
  const char* dash = kDashes[run % kDashCount];
  return *dash != 0 ? fmt::format(" stroke-dasharray=\"{}\"", dash) : std::string();
}

// A short line in the run's colour and dash pattern, to name the run beside text.
std::string Swatch(std::size_t run) {
  return fmt::format(
      "<svg class=\"swatch\" width=\"30\" height=\"10\" viewBox=\"0 0 30 10\" aria-hidden=\"true\">"
      "<line x1=\"1\" y1=\"5\" x2=\"29\" y2=\"5\" stroke-width=\"3\" stroke=\"{}\"{}/></svg>",
      Color(run), Dash(run));
}

std::string G(double value) { return fmt::format("{:g}", value); }

// ---- Axes ----

struct Axis {
  double lo = 0;
  double hi = 1;
  bool log = false;
  std::vector<double> ticks;
  std::function<std::string(double)> label;
  std::string title;

  double Transform(double v) const { return log ? std::log10(v) : v; }
  // Position in [0, 1] along the axis, clamped.
  double Fraction(double v) const {
    if (log && !(v > 0)) v = lo;
    v = std::clamp(v, lo, hi);
    const double span = Transform(hi) - Transform(lo);
    return span > 0 ? (Transform(v) - Transform(lo)) / span : 0;
  }
};

double NiceStep(double raw) {
  if (!(raw > 0) || !Finite(raw)) return 1;
  const double magnitude = std::pow(10, std::floor(std::log10(raw)));
  const double m = raw / magnitude;
  const double nice = m < 1.5 ? 1 : m < 3 ? 2 : m < 7 ? 5 : 10;
  return nice * magnitude;
}

// From `lo` up to a round value at or above `hi`, ticks at 1, 2 or 5 times a power of ten.
Axis LinearAxis(double lo, double hi, int target_ticks) {
  if (!Finite(lo) || !Finite(hi)) lo = 0, hi = 1;
  if (hi <= lo) hi = lo + 1;
  const double step = NiceStep((hi - lo) / target_ticks);
  Axis axis;
  axis.lo = std::floor(lo / step + 1e-9) * step;
  axis.hi = std::ceil(hi / step - 1e-9) * step;
  for (int i = 0;; ++i) {
    const double v = axis.lo + i * step;
    if (v > axis.hi + step * 1e-6) break;
    axis.ticks.push_back(std::abs(v) < step * 1e-9 ? 0 : v);
  }
  axis.label = [](double v) { return G(v); };
  return axis;
}

// Simulated time from 0 to `horizon_s`, ticks at round minutes, hours or days.
Axis TimeAxis(double horizon_s) {
  if (!(horizon_s > 0) || !Finite(horizon_s)) horizon_s = 3600;
  static constexpr double kSteps[] = {60,     120,    300,     600,     900,     1800,
                                      3600,   7200,   10800,   21600,   43200,   86400,
                                      172800, 604800, 1209600, 2592000, 7776000, 31536000};
  double step = kSteps[std::size(kSteps) - 1];
  for (const double candidate : kSteps) {
    if (horizon_s / candidate <= 8) {
      step = candidate;
      break;
    }
  }
  Axis axis;
  axis.lo = 0;
  axis.hi = horizon_s;
  for (int i = 0; i * step <= horizon_s * (1 + 1e-9); ++i) axis.ticks.push_back(i * step);
  const double unit = step >= 86400 ? 86400 : step >= 3600 ? 3600 : 60;
  const char* suffix = step >= 86400 ? " d" : step >= 3600 ? " h" : " min";
  axis.label = [unit, suffix](double v) {
    return v == 0 ? std::string("0") : G(v / unit) + suffix;
  };
  axis.title = "simulated time";
  return axis;
}

// Latencies in milliseconds on a log scale: decades, with 2 and 5 between when few.
Axis LatencyAxis(double min_ms, double max_ms) {
  if (!(min_ms > 0) || !Finite(min_ms) || !(max_ms > 0) || !Finite(max_ms)) {
    min_ms = 1;
    max_ms = 1000;
  }
  int lo = static_cast<int>(std::floor(std::log10(min_ms) + 1e-9));
  int hi = static_cast<int>(std::ceil(std::log10(max_ms) - 1e-9));
  if (hi <= lo) hi = lo + 1;
  Axis axis;
  axis.log = true;
  axis.lo = std::pow(10, lo);
  axis.hi = std::pow(10, hi);
  for (int e = lo; e <= hi; ++e) {
    const double decade = std::pow(10, e);
    axis.ticks.push_back(decade);
    if (hi - lo <= 2 && e < hi) {
      axis.ticks.push_back(2 * decade);
      axis.ticks.push_back(5 * decade);
    }
  }
  std::sort(axis.ticks.begin(), axis.ticks.end());
  axis.label = [](double v) { return v < 1000 ? G(v) + " ms" : G(v / 1000) + " s"; };
  axis.title = "P99 latency (log)";
  return axis;
}

// Durations in seconds on a log scale, ticks at round durations.
Axis DurationLogAxis(double min_s, double max_s) {
  struct Tick {
    double seconds;
    const char* label;
  };
  static constexpr Tick kTicks[] = {
      {1, "1 s"},     {10, "10 s"},   {60, "1 min"},   {600, "10 min"},   {3600, "1 h"},
      {21600, "6 h"}, {86400, "1 d"}, {604800, "1 w"}, {2592000, "30 d"}, {31536000, "1 y"}};
  if (!(min_s > 0) || !Finite(min_s)) min_s = 1;
  if (!(max_s > 0) || !Finite(max_s)) max_s = 3600;
  min_s = std::max(min_s, 1.0);
  max_s = std::max(max_s, min_s);
  Axis axis;
  axis.log = true;
  axis.lo = kTicks[0].seconds;
  for (const Tick& tick : kTicks) {
    if (tick.seconds <= min_s) axis.lo = tick.seconds;
  }
  axis.hi = max_s;
  for (const Tick& tick : kTicks) {
    if (tick.seconds >= max_s) {
      axis.hi = tick.seconds;
      break;
    }
  }
  if (axis.hi <= axis.lo) axis.hi = axis.lo * 10;
  for (const Tick& tick : kTicks) {
    if (tick.seconds >= axis.lo && tick.seconds <= axis.hi) axis.ticks.push_back(tick.seconds);
  }
  axis.label = [](double v) {
    for (const Tick& tick : kTicks) {
      if (tick.seconds == v) return std::string(tick.label);
    }
    return internal::FormatSeconds(v);
  };
  axis.title = "job completion time (log)";
  return axis;
}

// ---- Charts ----

struct Line {
  std::string label;
  std::size_t run = 0;  // colour
  std::vector<Point> points;
  bool step = false;  // a step function (horizontal, then vertical)
};

// A horizontal rule at a value of the y axis (a latency objective), labelled at its right end.
struct Rule {
  double y = 0;
  std::string label;
};

struct Chart {
  std::string title;
  Axis x;
  Axis y;
  std::vector<Line> lines;
  std::vector<Rule> rules;
  // Said in the plot when it has no line to draw: why it is empty.
  std::string empty = "no data";
  int width = 960;
  int height = 300;
};

constexpr int kLeft = 70;
constexpr int kRight = 18;
constexpr int kTop = 30;
constexpr int kBottom = 44;
constexpr int kLegendRow = 18;
constexpr double kCharWidth = 7;  // of the 12px legend font, roughly

std::string Svg(const Chart& chart) {
  // The legend below the plot, wrapped into rows.
  struct Item {
    double x;
    int row;
  };
  std::vector<Item> items;
  {
    double x = kLeft;
    int row = 0;
    for (const Line& line : chart.lines) {
      const double item_width = 36 + kCharWidth * static_cast<double>(line.label.size()) + 16;
      if (x + item_width > chart.width - kRight && x > kLeft) {
        x = kLeft;
        ++row;
      }
      items.push_back(Item{x, row});
      x += item_width;
    }
  }
  const int legend_rows = items.empty() ? 0 : items.back().row + 1;
  const int plot_w = chart.width - kLeft - kRight;
  const int plot_h = chart.height - kTop - kBottom;
  const int total_h = chart.height + legend_rows * kLegendRow + (legend_rows > 0 ? 10 : 0);
  auto px = [&](double v) { return kLeft + chart.x.Fraction(v) * plot_w; };
  auto py = [&](double v) { return kTop + (1 - chart.y.Fraction(v)) * plot_h; };

  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {0} {1}\" width=\"{0}\" "
      "height=\"{1}\" font-family=\"sans-serif\" font-size=\"12\" role=\"img\" "
      "aria-label=\"{2}\">\n",
      chart.width, total_h, HtmlEscape(chart.title));
  svg += fmt::format(
      "<text class=\"title\" font-size=\"14\" font-weight=\"600\" x=\"{}\" y=\"18\">{}</text>\n",
      kLeft, HtmlEscape(chart.title));
  // Grid and tick labels.
  for (const double tick : chart.y.ticks) {
    const double y = py(tick);
    svg += fmt::format(
        "<line class=\"grid\" stroke=\"#e6e6e6\" x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\"/>"
        "<text class=\"tick\" font-size=\"11\" fill=\"#555\" x=\"{}\" y=\"{:.1f}\" "
        "text-anchor=\"end\">{}</text>\n",
        kLeft, y, kLeft + plot_w, y, kLeft - 6, y + 4, HtmlEscape(chart.y.label(tick)));
  }
  for (const double tick : chart.x.ticks) {
    const double x = px(tick);
    svg += fmt::format(
        "<line class=\"grid\" stroke=\"#e6e6e6\" x1=\"{:.1f}\" y1=\"{}\" x2=\"{:.1f}\" y2=\"{}\"/>"
        "<text class=\"tick\" font-size=\"11\" fill=\"#555\" x=\"{:.1f}\" y=\"{}\" "
        "text-anchor=\"middle\">{}</text>\n",
        x, kTop, x, kTop + plot_h, x, kTop + plot_h + 16, HtmlEscape(chart.x.label(tick)));
  }
  svg += fmt::format(
      "<rect class=\"frame\" fill=\"none\" stroke=\"#999\" x=\"{}\" y=\"{}\" width=\"{}\" "
      "height=\"{}\"/>\n",
      kLeft, kTop, plot_w, plot_h);
  if (!chart.x.title.empty()) {
    svg += fmt::format("<text class=\"axis\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
                       kLeft + plot_w / 2, kTop + plot_h + 34, HtmlEscape(chart.x.title));
  }
  if (!chart.y.title.empty()) {
    svg += fmt::format(
        "<text class=\"axis\" transform=\"translate(14 {}) rotate(-90)\" "
        "text-anchor=\"middle\">{}</text>\n",
        kTop + plot_h / 2, HtmlEscape(chart.y.title));
  }

  // The lines, broken at non-finite values.
  bool any = false;
  for (const Line& line : chart.lines) {
    std::string d;
    bool pen_down = false;
    for (const Point& p : line.points) {
      if (!Finite(p.x) || !Finite(p.y) || (chart.y.log && !(p.y > 0)) ||
          (chart.x.log && !(p.x > 0))) {
        pen_down = false;
        continue;
      }
      const double x = px(p.x);
      const double y = py(p.y);
      if (!pen_down) {
        d += fmt::format("M{:.1f},{:.1f}", x, y);
      } else if (line.step) {
        d += fmt::format("H{:.1f}V{:.1f}", x, y);
      } else {
        d += fmt::format("L{:.1f},{:.1f}", x, y);
      }
      pen_down = true;
    }
    if (d.empty()) continue;
    any = true;
    svg += fmt::format(
        "<path class=\"line\" fill=\"none\" stroke-width=\"1.8\" d=\"{}\" "
        "stroke=\"{}\"{}><title>{}</title></path>\n",
        d, Color(line.run), Dash(line.run), HtmlEscape(line.label));
  }
  if (!any) {
    svg += fmt::format(
        "<text class=\"empty\" fill=\"#777\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}"
        "</text>\n",
        kLeft + plot_w / 2, kTop + plot_h / 2, HtmlEscape(chart.empty));
  }
  // Rules above the lines.
  for (const Rule& rule : chart.rules) {
    if (!Finite(rule.y) || (chart.y.log && !(rule.y > 0))) continue;
    const double y = py(rule.y);
    svg += fmt::format(
        "<line class=\"slo\" stroke=\"#222\" stroke-width=\"1.2\" "
        "x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\"/>"
        "<text class=\"slo\" font-size=\"11\" fill=\"#222\" x=\"{}\" y=\"{:.1f}\" "
        "text-anchor=\"end\">{}</text>\n",
        kLeft, y, kLeft + plot_w, y, kLeft + plot_w - 4, y - 4, HtmlEscape(rule.label));
  }

  // Legend.
  for (std::size_t i = 0; i < chart.lines.size(); ++i) {
    const Line& line = chart.lines[i];
    const double y = chart.height + 8 + items[i].row * kLegendRow;
    svg += fmt::format(
        "<line class=\"key\" stroke-width=\"3\" x1=\"{:.1f}\" y1=\"{}\" x2=\"{:.1f}\" y2=\"{}\" "
        "stroke=\"{}\"{}/>"
        "<text class=\"legend\" x=\"{:.1f}\" y=\"{}\">{}</text>\n",
        items[i].x, y, items[i].x + 30, y, Color(line.run), Dash(line.run), items[i].x + 36, y + 4,
        HtmlEscape(line.label));
  }
  svg += "</svg>\n";
  return svg;
}

// ---- Data ----

double HorizonS(std::span<const sim::RunResult> runs) {
  double horizon = 0;
  for (const sim::RunResult& run : runs) {
    horizon = std::max(horizon, static_cast<double>(run.horizon) / kSecond);
    if (!run.series.empty()) {
      horizon = std::max(horizon, static_cast<double>(run.series.back().t) / kSecond);
    }
  }
  return horizon;
}

// One value of each sample, against time in seconds, downsampled.
std::vector<Point> SeriesOf(const sim::RunResult& run,
                            const std::function<double(const sim::Sample&)>& value,
                            internal::Reduce reduce) {
  std::vector<Point> points;
  points.reserve(run.series.size());
  for (const sim::Sample& s : run.series) {
    points.push_back(Point{static_cast<double>(s.t) / kSecond, value(s)});
  }
  return internal::Downsample(points, kMaxPoints, reduce);
}

int IndexOf(const std::vector<std::string>& names, const std::string& name) {
  const auto it = std::find(names.begin(), names.end(), name);
  return it == names.end() ? -1 : static_cast<int>(it - names.begin());
}

int ServiceIndex(const sim::RunResult& run, const std::string& name) {
  for (std::size_t i = 0; i < run.services.size(); ++i) {
    if (run.services[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

double MaxY(const std::vector<Line>& lines) {
  double max = 0;
  for (const Line& line : lines) {
    for (const Point& p : line.points) {
      if (Finite(p.y)) max = std::max(max, p.y);
    }
  }
  return max;
}

// A share of the cluster's GPUs over time, in percent, one line per run.
std::string GpuShareChart(std::span<const sim::RunResult> runs, const std::string& title,
                          const std::string& y_title, double (*gpus)(const sim::Sample&)) {
  Chart chart;
  chart.title = title;
  chart.x = TimeAxis(HorizonS(runs));
  for (std::size_t r = 0; r < runs.size(); ++r) {
    const double total = runs[r].total_gpus;
    chart.lines.push_back(Line{runs[r].name, r,
                               SeriesOf(
                                   runs[r],
                                   [total, gpus](const sim::Sample& s) {
                                     return total > 0 ? gpus(s) / total * 100 : kNaN;
                                   },
                                   internal::Reduce::kMean),
                               false});
  }
  chart.y = LinearAxis(0, std::max(100.0, MaxY(chart.lines)), 5);
  chart.y.label = [](double v) { return G(v) + " %"; };
  chart.y.title = y_title;
  chart.empty = "no samples: the scenario's sample_interval is 0";
  return Svg(chart);
}

// The allocation of one GPU model over time, as a share of that model's GPUs, one line per run.
std::string GpuTypeChart(std::span<const sim::RunResult> runs, const std::string& type) {
  Chart chart;
  chart.width = 470;
  chart.height = 240;
  chart.x = TimeAxis(HorizonS(runs));
  double gpus = 0;
  for (std::size_t r = 0; r < runs.size(); ++r) {
    const int t = IndexOf(runs[r].gpu_types, type);
    if (t < 0) continue;
    const auto index = static_cast<std::size_t>(t);
    const double total =
        index < runs[r].gpu_type_totals.size() ? runs[r].gpu_type_totals[index] : 0;
    gpus = std::max(gpus, total);
    chart.lines.push_back(Line{runs[r].name, r,
                               SeriesOf(
                                   runs[r],
                                   [index, total](const sim::Sample& s) {
                                     return total > 0 && index < s.type_allocated_gpus.size()
                                                ? s.type_allocated_gpus[index] / total * 100
                                                : kNaN;
                                   },
                                   internal::Reduce::kMean),
                               false});
  }
  chart.title = fmt::format("{} ({} GPUs)", type, internal::FormatNumber(gpus));
  chart.y = LinearAxis(0, std::max(100.0, MaxY(chart.lines)), 4);
  chart.y.label = [](double v) { return G(v) + " %"; };
  chart.y.title = "allocated";
  chart.empty = gpus > 0 ? "no samples: the scenario's sample_interval is 0"
                         : "the cluster has no GPU of this model";
  return Svg(chart);
}

std::string AllocationChart(std::span<const sim::RunResult> runs) {
  return GpuShareChart(runs, "GPU allocation (allocated / total GPUs)", "allocated",
                       [](const sim::Sample& s) { return s.allocated_gpus; });
}

std::string UtilisationChart(std::span<const sim::RunResult> runs) {
  return GpuShareChart(runs, "GPU utilisation (GPUs at work / total GPUs)", "at work",
                       [](const sim::Sample& s) { return s.busy_gpus; });
}

std::string PendingChart(std::span<const sim::RunResult> runs, const std::string& queue) {
  Chart chart;
  chart.width = 470;
  chart.height = 240;
  chart.title = "pending jobs: " + queue;
  chart.x = TimeAxis(HorizonS(runs));
  for (std::size_t r = 0; r < runs.size(); ++r) {
    const int q = IndexOf(runs[r].queue_names, queue);
    if (q < 0) continue;
    const auto index = static_cast<std::size_t>(q);
    chart.lines.push_back(Line{runs[r].name, r,
                               SeriesOf(
                                   runs[r],
                                   [index](const sim::Sample& s) {
                                     return index < s.queue_pending.size()
                                                ? static_cast<double>(s.queue_pending[index])
                                                : kNaN;
                                   },
                                   internal::Reduce::kMax),
                               false});
  }
  chart.y = LinearAxis(0, std::max(1.0, MaxY(chart.lines)), 4);
  chart.y.title = "pending jobs";
  chart.empty = "no samples: the scenario's sample_interval is 0";
  return Svg(chart);
}

// The service's SLO as a rule of a latency chart (the first run's that has the service), the axis'
// range widened to show it.
void AddSloRule(std::span<const sim::RunResult> runs, const std::string& service, Chart& chart,
                double& min, double& max) {
  for (const sim::RunResult& run : runs) {
    const int i = ServiceIndex(run, service);
    if (i < 0) continue;
    const double slo = run.services[static_cast<std::size_t>(i)].slo_ms;
    if (!(slo > 0) || !Finite(slo)) return;
    chart.rules.push_back(Rule{slo, "SLO " + internal::FormatMillis(slo)});
    min = std::min(min, slo);
    max = std::max(max, slo);
    return;
  }
}

std::string LatencyChart(std::span<const sim::RunResult> runs, const std::string& service) {
  Chart chart;
  chart.width = 470;
  chart.height = 240;
  chart.title = "P99 latency: " + service;
  chart.x = TimeAxis(HorizonS(runs));
  double min = std::numeric_limits<double>::infinity();
  double max = 0;
  for (std::size_t r = 0; r < runs.size(); ++r) {
    const int i = ServiceIndex(runs[r], service);
    if (i < 0) continue;
    const auto index = static_cast<std::size_t>(i);
    Line line{runs[r].name, r,
              SeriesOf(
                  runs[r],
                  [index](const sim::Sample& s) {
                    return index < s.service_latency_p99_ms.size() ? s.service_latency_p99_ms[index]
                                                                   : kNaN;
                  },
                  internal::Reduce::kMax),
              false};
    for (const Point& p : line.points) {
      if (Finite(p.y) && p.y > 0) {
        min = std::min(min, p.y);
        max = std::max(max, p.y);
      }
    }
    chart.lines.push_back(std::move(line));
  }
  AddSloRule(runs, service, chart, min, max);
  chart.y = LatencyAxis(min, max);
  chart.empty = "no samples: the scenario's sample_interval is 0";
  return Svg(chart);
}

// The P99 of each latency window (an hour by default) as steps, one line per run, each labelled
// with its worst window.
std::string LatencyWindowChart(std::span<const sim::RunResult> runs, const std::string& service) {
  Chart chart;
  chart.width = 470;
  chart.height = 240;
  chart.x = TimeAxis(HorizonS(runs));
  std::string window = internal::WindowName(3600 * kMillisPerSecond);
  double min = std::numeric_limits<double>::infinity();
  double max = 0;
  for (std::size_t r = 0; r < runs.size(); ++r) {
    const int i = ServiceIndex(runs[r], service);
    if (i < 0) continue;
    const sim::ServiceMetrics& m = runs[r].services[static_cast<std::size_t>(i)];
    if (m.latency_window <= 0 || m.latency_p99_by_window_ms.empty()) continue;
    window = internal::WindowName(m.latency_window);
    const double w = static_cast<double>(m.latency_window) / kSecond;
    std::vector<Point> points;
    const std::size_t n = m.latency_p99_by_window_ms.size();
    for (std::size_t k = 0; k < n; ++k) {
      const double p99 = m.latency_p99_by_window_ms[k];
      points.push_back(Point{static_cast<double>(k) * w, p99});
      if (Finite(p99) && p99 > 0) {
        min = std::min(min, p99);
        max = std::max(max, p99);
      }
    }
    // The last window ends at the horizon.
    points.push_back(Point{static_cast<double>(runs[r].horizon) / kSecond, points.back().y});
    chart.lines.push_back(Line{
        fmt::format("{} (worst {}, {} / {} over SLO)", runs[r].name,
                    internal::FormatMillis(m.latency_p99_worst_window_ms), m.windows_over_slo, n),
        r, std::move(points), true});
  }
  chart.title = fmt::format("P99 per {}: {}", window, service);
  AddSloRule(runs, service, chart, min, max);
  chart.y = LatencyAxis(min, max);
  chart.empty = "no latency windows: the run has no simulated time";
  return Svg(chart);
}

std::string JctChart(std::span<const sim::RunResult> runs, const std::string& queue) {
  Chart chart;
  chart.width = 470;
  chart.height = 240;
  chart.title = "JCT CDF: " + queue;
  bool any_submitted = false;
  bool only_inference = true;
  for (const sim::RunResult& run : runs) {
    for (const sim::JobRecord& job : run.jobs) {
      if (job.queue == queue && job.kind != sim::WorkKind::kInference) only_inference = false;
    }
  }
  double min = std::numeric_limits<double>::infinity();
  double max = 0;
  for (std::size_t r = 0; r < runs.size(); ++r) {
    std::vector<double> jcts;
    std::size_t submitted = 0;
    for (const sim::JobRecord& job : runs[r].jobs) {
      if (job.queue != queue) continue;
      ++submitted;
      if (job.end >= 0) {
        jcts.push_back(static_cast<double>(job.end - job.submit) / kSecond);
      }
    }
    if (submitted == 0) continue;
    any_submitted = true;
    std::sort(jcts.begin(), jcts.end());
    // The fraction of completed jobs done within x, at evenly spaced ranks.
    // The line starts at 0 % at the shortest JCT and steps up at each.
    std::vector<Point> points;
    const std::size_t n = jcts.size();
    if (n > 0) points.push_back(Point{std::max(jcts[0], 1.0), 0});
    const std::size_t count = std::min(n, kMaxPoints - 1);
    for (std::size_t k = 0; k < count; ++k) {
      const std::size_t i = count == 1 ? n - 1 : k * (n - 1) / (count - 1);
      const double jct = std::max(jcts[i], 1.0);
      points.push_back(Point{jct, static_cast<double>(i + 1) / static_cast<double>(n) * 100});
      min = std::min(min, jct);
      max = std::max(max, jct);
    }
    chart.lines.push_back(
        Line{fmt::format("{} ({}/{} done)", runs[r].name, n, submitted), r, points, true});
  }
  chart.x = DurationLogAxis(min, max);
  if (!any_submitted) {
    chart.empty = "no job was submitted to this queue";
  } else if (only_inference) {
    chart.empty = "inference replicas only: they never complete";
  } else {
    chart.empty = "no job of this queue completed";
  }
  chart.y = LinearAxis(0, 100, 4);
  chart.y.label = [](double v) { return G(v) + " %"; };
  chart.y.title = "completed jobs";
  return Svg(chart);
}

// ---- Page ----

constexpr const char* kStyle = R"(
body { font-family: system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif;
       margin: 24px auto; max-width: 980px; padding: 0 12px; color: #222; }
h1 { font-size: 22px; margin-bottom: 4px; }
h2 { font-size: 17px; margin-top: 32px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
p.runs span.run { margin-right: 18px; white-space: nowrap; }
svg.swatch { margin-right: 5px; vertical-align: 0; }
table.headline { border-collapse: collapse; font-size: 14px; }
table.headline th, table.headline td { padding: 3px 12px; border-bottom: 1px solid #eee; }
table.headline td.value, table.headline th.run { text-align: right;
                                                  font-variant-numeric: tabular-nums; }
table.headline td.label { text-align: left; }
table.headline td.indented { padding-left: 28px; }
table.headline tr.section th { text-align: left; padding-top: 14px; background: #fafafa; }
div.grid { display: flex; flex-wrap: wrap; gap: 8px 20px; }
svg { max-width: 100%; height: auto; }
svg text { fill: #333; }
p.empty { color: #666; font-style: italic; }
footer { margin-top: 32px; color: #888; font-size: 12px; }
)";

std::string HeadlineTable(std::span<const sim::RunResult> runs) {
  std::string html = "<table class=\"headline\">\n<tr><th></th>";
  for (std::size_t r = 0; r < runs.size(); ++r) {
    html += fmt::format("<th class=\"run\">{}{}</th>", Swatch(r), HtmlEscape(runs[r].name));
  }
  html += "</tr>\n";
  for (const internal::Row& row : internal::HeadlineRows(runs)) {
    if (row.heading) {
      html += fmt::format("<tr class=\"section\"><th colspan=\"{}\">{}</th></tr>\n",
                          runs.size() + 1, HtmlEscape(row.label));
      continue;
    }
    html += fmt::format("<tr><td class=\"label{}\">{}</td>", row.indented ? " indented" : "",
                        HtmlEscape(row.label));
    for (const std::string& cell : row.cells) {
      html += fmt::format("<td class=\"value\">{}</td>", HtmlEscape(cell));
    }
    html += "</tr>\n";
  }
  html += "</table>\n";
  return html;
}

}  // namespace

std::string Html(std::span<const sim::RunResult> runs, const std::string& scenario) {
  const std::string name = HtmlEscape(scenario);
  std::string html = fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
      "<title>Arbiter simulation: {0}</title>\n<style>{1}</style>\n</head>\n<body>\n"
      "<h1>Arbiter simulation: {0}</h1>\n",
      name, kStyle);
  html += "<p class=\"runs\">";
  for (std::size_t r = 0; r < runs.size(); ++r) {
    html += fmt::format("<span class=\"run\">{}{}</span>", Swatch(r), HtmlEscape(runs[r].name));
  }
  html += "</p>\n";
  if (runs.empty()) {
    html += "<p>No runs.</p>\n</body>\n</html>\n";
    return html;
  }

  html += "<h2>Comparison</h2>\n" + HeadlineTable(runs);
  html += "<h2>GPU allocation over time</h2>\n" + AllocationChart(runs);
  html += "<h2>GPU utilisation over time</h2>\n" + UtilisationChart(runs);

  std::vector<std::string> types;
  for (const sim::RunResult& run : runs) {
    for (const std::string& type : run.gpu_types) {
      if (std::find(types.begin(), types.end(), type) == types.end()) types.push_back(type);
    }
  }
  html += "<h2>GPU allocation per GPU model (allocated / GPUs of the model)</h2>\n";
  if (types.empty()) {
    html += "<p class=\"empty\">The cluster has no GPU.</p>\n";
  } else {
    html += "<div class=\"grid\">\n";
    for (const std::string& type : types) html += GpuTypeChart(runs, type);
    html += "</div>\n";
  }

  const std::vector<std::string> queues = internal::QueueUnion(runs);
  html += "<h2>Pending jobs per queue</h2>\n<div class=\"grid\">\n";
  if (queues.empty()) html += "<p class=\"empty\">No queue.</p>\n";
  for (const std::string& queue : queues) html += PendingChart(runs, queue);
  html += "</div>\n";

  const std::vector<std::string> services = internal::ServiceUnion(runs);
  constexpr const char* kNoServices =
      "<p class=\"empty\">No inference service in this scenario: no request latency to draw.</p>\n";
  html += "<h2>Inference P99 latency over time (worst scale interval of each sample)</h2>\n";
  if (services.empty()) {
    html += kNoServices;
  } else {
    html += "<div class=\"grid\">\n";
    for (const std::string& service : services) html += LatencyChart(runs, service);
    html += "</div>\n";
  }
  html += "<h2>Inference P99 latency per window</h2>\n";
  if (services.empty()) {
    html += kNoServices;
  } else {
    html += "<div class=\"grid\">\n";
    for (const std::string& service : services) html += LatencyWindowChart(runs, service);
    html += "</div>\n";
  }

  html += "<h2>Job completion time per queue (CDF of completed jobs)</h2>\n<div class=\"grid\">\n";
  for (const std::string& queue : queues) html += JctChart(runs, queue);
  html += "</div>\n";
  html += "<footer>Generated by Arbiter's simulator.</footer>\n</body>\n</html>\n";
  return html;
}

}  // namespace arbiter::report
