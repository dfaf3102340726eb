// `arbiter sim`: load a scenario, run its configurations (in parallel threads, each on its own
// copy of the cluster), print the comparison and write the reports asked for.
#include "sim/sim.h"

#include <fmt/core.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cli/commands.h"
#include "config/config.h"
#include "config/lint.h"
#include "report/report.h"
#include "scenario/scenario.h"

namespace arbiter::cli {
namespace {

// The progress bar's own short clock, to the minute (everything else prints times with
// FormatTime).
std::string BarClock(Millis t) {
  const Millis minutes = t / (60 * kMillisPerSecond);
  return fmt::format("{}d {:02}h{:02}", minutes / 1440, minutes / 60 % 24, minutes % 60);
}

// A one-line progress bar on stderr, redrawn as the runs advance.
class Progress {
 public:
  Progress(std::size_t runs, Millis horizon, bool enabled)
      : now_(runs), horizon_(horizon), enabled_(enabled) {
    for (auto& n : now_) n = 0;
  }
  void Update(std::size_t run, Millis now) {
    if (!enabled_) return;
    now_[run] = now;
    std::lock_guard<std::mutex> lock(mu_);
    Millis least = now_[0];
    for (const auto& n : now_) least = std::min<Millis>(least, n);
    if (horizon_ > 0) {
      const double f = std::min(1.0, static_cast<double>(least) / static_cast<double>(horizon_));
      const int filled = static_cast<int>(f * 30);
      fmt::print(stderr, "\r  simulating [{}{}] {:3.0f}%  {} of {}", std::string(filled, '#'),
                 std::string(30 - filled, '.'), f * 100, BarClock(least), BarClock(horizon_));
    } else {
      fmt::print(stderr, "\r  simulating: {} simulated", BarClock(least));
    }
    std::fflush(stderr);
  }
  void Done() {
    if (enabled_) fmt::print(stderr, "\r{}\r", std::string(70, ' '));
  }

 private:
  std::vector<std::atomic<Millis>> now_;
  Millis horizon_;
  bool enabled_;
  std::mutex mu_;
};

bool WriteText(const std::string& path, const std::string& text) {
  if (path == "-") {
    fmt::print("{}", text);
    return true;
  }
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  if (!out) {
    fmt::print(stderr, "error: {}: cannot write\n", path);
    return false;
  }
  return true;
}

}  // namespace

namespace {

// A moment of the simulation, and a duration, as every simulator output prints them.
std::string Clock(Millis t) { return FormatTime(t, TimeStyle::kElapsed); }

std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& i : items) out += (out.empty() ? "" : ", ") + i;
  return out;
}

}  // namespace

int RunLintScenario(const std::string& path, bool strict) {
  Result<config::Scenario> scenario = config::LoadScenarioFile(path);
  if (!scenario.ok()) {
    fmt::print(stderr, "error: {}\n", scenario.status().message());
    return 1;
  }
  std::size_t total = 0;
  for (const config::SimConfiguration& c : scenario->configurations) {
    Result<ClusterState> state = ClusterState::Create(c.cluster);
    if (!state.ok()) {
      fmt::print(stderr, "error: {}: {}\n", c.name, state.status().message());
      return 1;
    }
    const std::vector<config::LintWarning> warnings =
        config::LintConfiguration(*scenario, c, *state);
    fmt::print("configuration {}: {}\n", c.name,
               warnings.empty()
                   ? "ok"
                   : fmt::format("{} warning{}", warnings.size(), warnings.size() == 1 ? "" : "s"));
    for (const config::LintWarning& w : warnings) {
      fmt::print("  warning: {}: {} [{}]\n", w.field, w.message, w.code);
    }
    total += warnings.size();
  }
  return strict && total > 0 ? 1 : 0;
}

int RunExplainSim(const ExplainSimArgs& args) {
  Result<Millis> at = config::ParseDuration(args.at, "--at");
  if (!at.ok()) {
    fmt::print(stderr, "error: {}\n", at.status().message());
    return 1;
  }
  Result<config::Scenario> scenario = config::LoadScenarioFile(args.scenario, args.seed);
  if (!scenario.ok()) {
    fmt::print(stderr, "error: {}\n", scenario.status().message());
    return 1;
  }
  const config::SimConfiguration* chosen = &scenario->configurations.front();
  if (!args.run.empty()) {
    chosen = nullptr;
    std::string known;
    for (const config::SimConfiguration& c : scenario->configurations) {
      if (c.name == args.run) chosen = &c;
      known += (known.empty() ? "" : ", ") + c.name;
    }
    if (!chosen) {
      fmt::print(stderr, "error: --run: unknown configuration '{}' (known: {})\n", args.run, known);
      return 1;
    }
  }
  if (scenario->options.horizon > 0 && *at > scenario->options.horizon) {
    fmt::print(stderr, "error: --at: {} is past the scenario's horizon ({})\n", Clock(*at),
               Clock(scenario->options.horizon));
    return 1;
  }
  Result<sim::JobStatusAt> status = sim::Inspect(chosen->cluster, chosen->engine, chosen->workload,
                                                 scenario->options, args.job, *at);
  if (!status.ok()) {
    fmt::print(stderr, "error: {}\n", status.status().message());
    return 1;
  }
  const sim::JobStatusAt& s = *status;
  const sim::JobRecord& r = s.record;
  fmt::print("{} ({}, workload {}, queue {}, class {}, {:g} GPU{}) in {} / {} at {}\n", r.name,
             sim::WorkKindName(r.kind), r.workload, r.queue, r.priority_class, r.gpus,
             r.gpus == 1 ? "" : "s", scenario->name, chosen->name, Clock(s.at));
  if (s.state != sim::JobStatusAt::State::kNotSubmitted) {
    fmt::print("  submitted at {}", Clock(r.submit));
    if (r.first_start >= 0) fmt::print(", first started at {}", Clock(r.first_start));
    fmt::print(", evicted {} times, {} failures, {:.2f} GPU-hours lost so far\n", r.evictions,
               r.failures, r.gpu_hours_lost);
  }
  using State = sim::JobStatusAt::State;
  switch (s.state) {
    case State::kNotSubmitted:
      fmt::print("  not submitted yet: arrives at {}\n", Clock(s.until));
      break;
    case State::kPending:
      fmt::print("  pending since {} (for {})\n", Clock(s.since), FormatDuration(s.at - s.since));
      if (s.cycle_at < 0 && s.stopped_at >= 0) {
        fmt::print("  stopped by its autoscaler at {}, before the next cycle\n",
                   Clock(s.stopped_at));
      } else if (s.cycle_at < 0 && scenario->options.horizon > 0) {
        fmt::print("  no cycle runs from {} to the horizon ({}): still pending then\n", Clock(s.at),
                   Clock(scenario->options.horizon));
      } else if (s.cycle_at < 0) {
        fmt::print("  no cycle runs after {}: the run ends with it pending\n", Clock(s.at));
      } else if (s.placed) {
        fmt::print("  the cycle at {} places it: {}\n", Clock(s.cycle_at), Join(s.nodes));
        if (!s.victims.empty()) {
          fmt::print("  preempting: signals {}; starts at {}\n", Join(s.victims), Clock(s.until));
        }
      } else if (s.reason) {
        fmt::print("  why at the cycle at {}: {}\n", Clock(s.cycle_at),
                   s.reason->Describe(TimeStyle::kElapsed));
      }
      break;
    case State::kStarting:
      fmt::print("  preempting: its devices are given ({}); waits for {} to stop, starts at {}\n",
                 Join(s.nodes), s.victims.empty() ? "its victims" : Join(s.victims),
                 Clock(s.until));
      break;
    case State::kRunning:
      fmt::print("  running since {} on {}\n", Clock(s.since), Join(s.nodes));
      if (s.progress >= 0) {
        fmt::print("  progress {} of {}, {} kept by its last checkpoint; expected to end at {}\n",
                   FormatDuration(s.progress), FormatDuration(s.work),
                   FormatDuration(s.checkpointed), Clock(s.until));
      }
      break;
    case State::kDraining:
      fmt::print("  evicted at {} for {}: signalled, stops at {}, then waits again\n",
                 Clock(s.since), s.preemptor.empty() ? "another job" : s.preemptor, Clock(s.until));
      break;
    case State::kCompleted:
      fmt::print("  completed at {} (JCT {})\n", Clock(s.since),
                 FormatDuration(s.since - r.submit));
      break;
    case State::kStopped:
      fmt::print("  stopped by its autoscaler at {}\n", Clock(s.since));
      break;
  }
  return 0;
}

int RunSim(const SimArgs& args) {
  Result<config::Scenario> scenario = config::LoadScenarioFile(args.scenario, args.seed);
  if (!scenario.ok()) {
    fmt::print(stderr, "error: {}\n", scenario.status().message());
    return 1;
  }
  scenario->options.check_invariants = args.check_invariants;
  Result<std::vector<const config::SimConfiguration*>> chosen =
      config::ChooseConfigurations(*scenario, args.runs);
  if (!chosen.ok()) {
    fmt::print(stderr, "error: --run: {}\n", chosen.status().message());
    return 1;
  }
  if (!scenario->skipped_rows.empty()) {
    // The trace readers list a few rows of each kind and count the rest.
    constexpr std::size_t kShown = 10;
    fmt::print(stderr, "warning: trace rows skipped:\n");
    for (std::size_t i = 0; i < scenario->skipped_rows.size() && i < kShown; ++i) {
      fmt::print(stderr, "  {}\n", scenario->skipped_rows[i]);
    }
    if (scenario->skipped_rows.size() > kShown) {
      fmt::print(stderr, "  ... and {} more\n", scenario->skipped_rows.size() - kShown);
    }
  }

  const bool show = !args.quiet && isatty(fileno(stderr)) != 0;
  Progress progress(chosen->size(), scenario->options.horizon, show);
  const auto start = std::chrono::steady_clock::now();
  Result<std::vector<sim::RunResult>> results = config::SimulateConfigurations(
      *scenario, *chosen, [&progress](std::size_t run, Millis now) { progress.Update(run, now); });
  progress.Done();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!results.ok()) {
    fmt::print(stderr, "error: {}\n", results.status().message());
    return 1;
  }
  const std::vector<sim::RunResult>& runs = *results;
  std::int64_t events = 0;
  for (const sim::RunResult& r : runs) events += r.events;

  if (args.json != "-") {
    fmt::print("scenario {} (seed {}): {} configuration(s), {} events in {:.2f} s\n\n",
               scenario->name, scenario->seed, runs.size(), events, seconds);
    fmt::print("{}", report::Table(runs));
  }
  if (!args.json.empty() && !WriteText(args.json, report::Json(runs, scenario->name))) return 1;
  if (!args.html.empty()) {
    if (!WriteText(args.html, report::Html(runs, scenario->name))) return 1;
    if (args.json != "-") fmt::print("\nreport: {}\n", args.html);
  }
  if (!args.csv.empty()) {
    if (Status st = report::WriteCsv(runs, args.csv); !st.ok()) {
      fmt::print(stderr, "error: {}\n", st.message());
      return 1;
    }
    if (args.json != "-") fmt::print("time series and jobs: {}/\n", args.csv);
  }
  return 0;
}

}  // namespace arbiter::cli
